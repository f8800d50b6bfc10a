"""/openapi.json declares every status each route can answer, errors as `{"detail": ...}`."""

from __future__ import annotations

import pytest

EXPECTED = {
    ("post", "/api/work-items/mr"): {200, 201, 401, 403, 404, 408, 409, 413, 422, 429, 502},
    ("get", "/api/work-items/mr"): {200, 401, 403, 404, 422},
    ("get", "/api/work-items"): {200, 401, 403, 422},
    ("get", "/api/work-items/{item_id}"): {200, 401, 403, 404, 422},
    ("post", "/api/work-items/{item_id}/retry"): {200, 401, 403, 404, 408, 409, 413, 422},
    ("post", "/api/work-items/{item_id}/cancel"): {200, 401, 403, 404, 408, 409, 413, 422, 502},
    ("get", "/api/work-items/me"): {200, 401},
    ("post", "/api/webhooks/gitlab"): {200, 400, 401, 408, 413, 503},
}


@pytest.fixture
def openapi(client):
    answer = client.get("/openapi.json")
    assert answer.status_code == 200
    return answer.json()


@pytest.mark.parametrize(("method", "path"), EXPECTED)
def test_every_status_of_a_route_is_declared(openapi, method, path):
    responses = openapi["paths"][path][method]["responses"]

    assert {int(status) for status in responses} >= EXPECTED[method, path]
    for status, declared in responses.items():
        assert declared["description"]
        if int(status) == 422:
            schema = declared["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/HTTPValidationError"}
        elif int(status) >= 400:
            schema = declared["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}


def test_the_error_model_is_an_object_with_detail(openapi):
    error_body = openapi["components"]["schemas"]["ErrorBody"]

    assert error_body["required"] == ["detail"]
    assert error_body["properties"]["detail"]["type"] == "string"


def test_401_and_429_declare_their_headers(openapi):
    submit = openapi["paths"]["/api/work-items/mr"]["post"]["responses"]

    assert "WWW-Authenticate" in submit["401"]["headers"]
    assert "Retry-After" in submit["429"]["headers"]
