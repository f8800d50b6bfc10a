"""`Urllib3Backend`: the same requests on the wire, the same answers and failures as
python-gitlab's requests backend, in fewer steps.

Most tests run one operation twice against a recording HTTP server: through a client as
the service builds it, and through one whose python-gitlab uses the requests backend
(as before), and compare what the server received and what the caller saw.
"""

from __future__ import annotations

import datetime as dt
import functools
import ipaddress
import re
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any

import gitlab
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from gitlab._backends.requests_backend import RequestsBackend
from gitlab_client_support import PROJECT, TOKEN
from http_backend_support import Answer, RecordingServer
from urllib3.exceptions import InsecureRequestWarning

from workqueue.gitlab import GitLabClient, GitLabError, PermanentGitLabError, RetryableGitLabError
from workqueue.gitlab.client import _read_environment_once
from workqueue.gitlab.http_backend import Urllib3Backend

MR_JSON = {
    "iid": 3,
    "web_url": "http://gitlab.example/acme/-/merge_requests/3",
    "state": "opened",
    "draft": False,
    "sha": "a" * 40,
    "source_branch": "bot/x",
    "target_branch": "main",
    "source_project_id": 1,
    "target_project_id": 1,
    "author": {"id": 5, "username": "bot"},
    "title": "t",
    "description": "",
    "labels": [],
}


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    running = RecordingServer().start()
    try:
        yield running
    finally:
        running.stop()


def requests_backed(url: str, token: str = TOKEN, **options: Any) -> GitLabClient:
    """A client whose python-gitlab sends through requests, configured as the client
    configures its own (the environment read once)."""
    gl = gitlab.Gitlab(
        url,
        private_token=token,
        retry_transient_errors=False,
        keep_base_url=True,
        backend=RequestsBackend,
    )
    _read_environment_once(gl, url)
    return GitLabClient(url, token, gl=gl, **options)


@pytest.fixture
def clients(server: RecordingServer) -> Iterator[dict[str, GitLabClient]]:
    built = {
        "urllib3": GitLabClient(server.url, TOKEN, timeout=5),
        "requests": requests_backed(server.url, timeout=5),
    }
    assert isinstance(built["urllib3"]._gl._backend, Urllib3Backend)
    assert type(built["requests"]._gl._backend) is RequestsBackend
    yield built
    for client in built.values():
        client.close()
        client._gl.session.close()


def run_on_both(
    server: RecordingServer, clients: dict[str, GitLabClient], operation: Callable[..., Any]
) -> dict[str, tuple[Any, list[tuple[str, str, tuple[tuple[str, str], ...], bytes]]]]:
    """{backend: (result or exception, [(method, target, headers, body) received])}."""
    seen = {}
    for name, client in clients.items():
        server.clear()
        try:
            outcome: Any = operation(client)
        except Exception as error:  # compared below, whatever it is
            outcome = error
        wire = [(r.method, r.target, r.headers, r.body) for r in server.received]
        seen[name] = (outcome, wire)
    return seen


def without_addresses(text: str) -> str:
    return re.sub(r"0x[0-9a-f]+", "0x…", text)


def same_outcome(left: Any, right: Any) -> None:
    if isinstance(left, BaseException) or isinstance(right, BaseException):
        assert type(left) is type(right), (left, right)
        assert without_addresses(str(left)) == without_addresses(str(right))
        assert without_addresses(repr(left)) == without_addresses(repr(right))
    else:
        assert left == right


OPERATIONS: dict[str, Callable[[GitLabClient], Any]] = {
    "get with a quoted path": lambda c: c._gl.http_get(
        "/projects/acme%2Fplatform%2Fw%C3%BCdgets/merge_requests/3"
    ),
    "get with awkward params": lambda c: c._gl.http_get(
        "/projects/1/repository/compare",
        query_data={
            "from": "main",
            "to": "bot/ü x&y=z?#",
            "straight": False,
            "refs[]": ["a b", "c/d"],
            "skip": None,
            "n": 3,
            "filter": {"state": "opened", "label": "x y"},
        },
    ),
    "a url with its own query": lambda c: c._gl.http_get(f"{c._gl.url}/projects?page=2&x=1"),
    "post json": lambda c: c._gl.http_post(
        "/projects/1/merge_requests",
        post_data={"title": "Bump ü \u2603", "labels": "a,b", "remove_source_branch": True},
    ),
    "post empty": lambda c: c._gl.http_post("/projects/1/jobs/2/retry"),
    "put json": lambda c: c._gl.http_put("/projects/1/merge_requests/3", post_data={"x": 1}),
    "delete": lambda c: c._gl.http_delete("/projects/1/repository/branches/bot%2Fx"),
    "list every page": lambda c: c._gl.http_list(
        "/projects/1/merge_requests", query_data={"state": "opened"}, get_all=True
    ),
    "merge request through the client": lambda c: c.merge_request(PROJECT, 3),
    "open merge requests through the client": lambda c: c.open_merge_requests(PROJECT, "bot/x"),
    "update through the client": lambda c: c.update_merge_request(
        PROJECT, 3, labels=["a", "b"], squash=True
    ),
    "merge base with a list param": lambda c: c.merge_base(PROJECT, ["main", "bot/x"]),
}


def answer_for(request: Any) -> Answer:
    if (
        "merge_requests" in request.target
        and request.method == "GET"
        and "/3" not in request.target
    ):
        return Answer(body=[MR_JSON])
    if "merge_requests" in request.target or request.method == "PUT":
        return Answer(body=MR_JSON)
    if request.method == "DELETE":
        return Answer(status=204, body=b"")
    return Answer(body={"id": "a" * 40, "short_id": "a" * 8})


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_the_wire_request_and_the_result_are_those_of_requests(server, clients, name):
    server.respond = answer_for
    seen = run_on_both(server, clients, OPERATIONS[name])
    (fast, fast_wire), (slow, slow_wire) = seen["urllib3"], seen["requests"]
    assert fast_wire == slow_wire
    assert len(fast_wire) == 1
    if isinstance(fast, requests.Response):
        assert (fast.status_code, fast.headers, fast.content) == (
            slow.status_code,
            slow.headers,
            slow.content,
        )
    else:
        same_outcome(fast, slow)


def test_pages_are_followed_through_link_headers_as_with_requests(server, clients):
    def paged(request: Any) -> Answer:
        if "page=2" in request.target:
            return Answer(body=[dict(MR_JSON, iid=4)])
        link = f'<{server.url}/api/v4/projects/1/merge_requests?page=2&per_page=1>; rel="next"'
        return Answer(body=[MR_JSON], headers={"Link": link, "X-Per-Page": "1"})

    server.respond = paged
    seen = run_on_both(server, clients, lambda c: c.open_merge_requests(1, "bot/x"))
    assert seen["urllib3"][1] == seen["requests"][1]
    assert len(seen["urllib3"][1]) == 2
    assert [mr.iid for mr in seen["urllib3"][0]] == [3, 4] == [mr.iid for mr in seen["requests"][0]]


def test_the_common_calls_never_reach_session_request(server, monkeypatch):
    """The fast path really is taken (the requests backend would also pass the tests)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("went through requests.Session.request")

    monkeypatch.setattr(RequestsBackend, "http_request", refuse)
    server.respond = answer_for
    with GitLabClient(server.url, TOKEN, timeout=5) as client:
        assert client.merge_request(PROJECT, 3).iid == 3
        assert len(client.open_merge_requests(PROJECT, "bot/x")) == 1
        client.delete_branch(PROJECT, "bot/x")
        client.update_merge_request(PROJECT, 3, title="x")
    assert [r.method for r in server.received] == ["GET", "GET", "DELETE", "PUT"]


@pytest.mark.parametrize(
    "answer",
    [
        Answer(status=429, headers={"Retry-After": "7"}, body={"message": "Retry later"}),
        Answer(status=503, headers={"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"}),
        Answer(status=502, body=b"<html>bad gateway</html>", headers={"Content-Type": "text/html"}),
        Answer(status=409, body={"message": "Resource lock"}),
        Answer(status=404, body={"message": "404 Not found"}),
        Answer(status=401, body={"message": "401 Unauthorized"}),
        Answer(status=200, body=b"{not json"),
        Answer(status=200, body=[1, 2]),
        Answer(truncate=True),
    ],
    ids=["429", "503-date", "502-html", "409-lock", "404", "401", "bad-json", "bad-shape", "cut"],
)
def test_failures_are_classified_as_with_requests(server, clients, answer):
    server.respond = lambda _request: answer
    reports: dict[str, list[tuple[str, int | str]]] = {}
    for name, client in clients.items():
        reports[name] = []
        client._transport._on_call = lambda operation, status, into=reports[name]: into.append(
            (operation, status)
        )
    seen = run_on_both(server, clients, lambda c: c.merge_request(PROJECT, 3))
    (fast, fast_wire), (slow, slow_wire) = seen["urllib3"], seen["requests"]
    assert fast_wire == slow_wire
    assert isinstance(fast, GitLabError)
    assert (type(fast), fast.status, fast.message) == (type(slow), slow.status, slow.message)
    if fast.retry_after is None or slow.retry_after is None:
        assert fast.retry_after == slow.retry_after
    else:
        assert fast.retry_after == pytest.approx(slow.retry_after, abs=5)
    assert reports["urllib3"] == reports["requests"]
    assert TOKEN not in repr(fast)
    assert TOKEN not in str(fast)


def test_retry_after_is_read_from_the_answer(server, clients):
    server.respond = lambda _request: Answer(status=429, headers={"Retry-After": "7"})
    with pytest.raises(RetryableGitLabError) as caught:
        clients["urllib3"].merge_request(PROJECT, 3)
    assert (caught.value.status, caught.value.retry_after) == (429, 7.0)
    assert len(server.received) == 1  # no retry inside python-gitlab


def test_a_stalled_answer_times_out_like_requests(server):
    server.respond = lambda _request: Answer(stall=1.0)
    fast = GitLabClient(server.url, TOKEN, timeout=0.2)
    slow = requests_backed(server.url, timeout=0.2)
    errors = []
    for client in (fast, slow):
        with pytest.raises(RetryableGitLabError) as caught:
            client.merge_request(PROJECT, 3)
        errors.append(caught.value)
        client.close()
    assert errors[0].message.startswith("ReadTimeout: ")
    assert without_addresses(errors[0].message) == without_addresses(errors[1].message)
    assert TOKEN not in repr(errors[0])


def test_refused_and_cut_connections_fail_like_requests(closed_port):
    url = f"http://127.0.0.1:{closed_port}"
    outcomes = []
    for client in (GitLabClient(url, TOKEN, timeout=5), requests_backed(url, timeout=5)):
        with pytest.raises(RetryableGitLabError) as caught:
            client.merge_request(PROJECT, 3)
        outcomes.append(caught.value)
        client.close()
    assert outcomes[0].message.startswith("ConnectionError: ")
    assert without_addresses(outcomes[0].message) == without_addresses(outcomes[1].message)
    assert TOKEN not in str(outcomes[0])


def test_connections_are_kept_alive_and_shared_by_threads(server):
    server.respond = lambda _request: Answer(body=MR_JSON)
    with GitLabClient(server.url, TOKEN, timeout=5) as client:
        for _ in range(20):
            client.merge_request(PROJECT, 3)
        assert len(server.connections()) == 1

        barrier = threading.Barrier(4)
        failures: list[BaseException] = []

        def work() -> None:
            try:
                barrier.wait()
                for _ in range(25):
                    client.merge_request(PROJECT, 3)
            except BaseException as error:  # reported by the assertion below
                failures.append(error)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert len(server.received) == 120
        # Each thread holds one connection at a time; idle ones go back to the pool.
        assert len(server.connections()) <= 4


def redirecting(request: Any) -> Answer:
    if request.target.startswith("/api/v4/old"):
        return Answer(status=301, headers={"Location": "/api/v4/new"}, body=b"")
    if request.target.startswith("/api/v4/found"):
        return Answer(status=302, headers={"Location": "/api/v4/new"}, body=b"")
    if request.target.startswith("/api/v4/temporary"):
        return Answer(status=307, headers={"Location": "/api/v4/new"}, body=b"")
    if request.target.startswith("/api/v4/loop"):
        return Answer(status=302, headers={"Location": "/api/v4/loop"}, body=b"")
    return Answer(body=MR_JSON)


@pytest.mark.parametrize(
    "operation",
    [
        lambda c: c._gl.http_get("/old"),
        lambda c: c._gl.http_post("/found", post_data={"a": 1}),
        lambda c: c._gl.http_put("/temporary", post_data={"a": 1}),
        lambda c: c._gl.http_delete("/old"),
        lambda c: c._gl.http_get("/loop"),
        lambda c: c._transport.post("x.create", "/found", dict, {"a": 1}),
    ],
    ids=["get-301", "post-302", "put-307", "delete-301", "get-loop", "client-post-302"],
)
def test_redirects_are_followed_or_refused_as_with_requests(server, clients, operation):
    server.respond = redirecting
    seen = run_on_both(server, clients, operation)
    (fast, fast_wire), (slow, slow_wire) = seen["urllib3"], seen["requests"]
    assert fast_wire == slow_wire
    assert len(fast_wire) >= 2
    same_outcome(fast, slow)


def test_client_post_redirect_is_permanent(server):
    server.respond = redirecting
    with (
        GitLabClient(server.url, TOKEN, timeout=5) as client,
        pytest.raises(PermanentGitLabError) as caught,
    ):
        client._transport.post("x.create", "/found", dict, {"a": 1})
    assert caught.value.message.startswith("redirected (")


def test_cookies_a_server_sets_are_sent_back_as_requests_does(server, clients):
    def cookie_once(request: Any) -> Answer:
        if not any(name.lower() == "cookie" for name, _ in request.headers):
            return Answer(body=MR_JSON, headers={"Set-Cookie": "lb=node-2; Path=/"})
        return Answer(body=MR_JSON)

    server.respond = cookie_once
    seen = run_on_both(server, clients, lambda c: [c.merge_request(PROJECT, 3) for _ in range(3)])
    assert seen["urllib3"][1] == seen["requests"][1]
    later = seen["urllib3"][1][1][2]
    assert ("Cookie", "lb=node-2") in later


def test_session_response_hooks_run_as_under_requests(server, clients):
    server.respond = lambda _request: Answer(body=MR_JSON)
    seen: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
    for name, client in clients.items():
        calls = seen.setdefault(name, [])

        def hook(response: requests.Response, *_: Any, into=calls, **kwargs: Any) -> None:
            into.append((response.status_code, str(response.url), kwargs))

        client._gl.session.hooks["response"].append(hook)
        client.merge_request(PROJECT, 3)
    assert seen["urllib3"] == seen["requests"]
    assert len(seen["urllib3"]) == 1


def test_an_instrumented_session_send_sees_every_call(server, monkeypatch):
    """OpenTelemetry's requests instrumentation wraps Session.send to trace each call."""
    sent: list[str] = []
    original = requests.Session.send

    @functools.wraps(original)
    def traced(self: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> Any:
        sent.append(str(request.url))
        return original(self, request, **kwargs)

    monkeypatch.setattr(requests.Session, "send", traced)
    server.respond = lambda _request: Answer(body=MR_JSON)
    with GitLabClient(server.url, TOKEN, timeout=5) as client:
        client.merge_request(PROJECT, 3)
    assert sent == [f"{server.url}/api/v4/projects/acme%2Fplatform%2Fwidgets/merge_requests/3"]


# -- TLS --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1: (certificate path, key path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


@pytest.fixture
def tls_server(certificate: tuple[str, str]) -> Iterator[RecordingServer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    running = RecordingServer(tls=context).start()
    running.respond = lambda _request: Answer(body=MR_JSON)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def no_ca_variables(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_an_untrusted_certificate_fails_like_requests(tls_server, no_ca_variables):
    errors = []
    for client in (
        GitLabClient(tls_server.url, TOKEN, timeout=5),
        requests_backed(tls_server.url, timeout=5),
    ):
        with pytest.raises(RetryableGitLabError) as caught:
            client.merge_request(PROJECT, 3)
        errors.append(caught.value)
        client.close()
    assert errors[0].message.startswith("SSLError: ")
    assert "CERTIFICATE_VERIFY_FAILED" in errors[0].message
    assert without_addresses(errors[0].message) == without_addresses(errors[1].message)


def test_the_ca_bundle_variable_is_trusted(tls_server, certificate, no_ca_variables):
    no_ca_variables.setenv("REQUESTS_CA_BUNDLE", certificate[0])
    with GitLabClient(tls_server.url, TOKEN, timeout=5) as client:
        assert client.merge_request(PROJECT, 3).iid == 3
    assert len(tls_server.received) == 1


def test_verification_can_be_turned_off(tls_server, no_ca_variables):
    with GitLabClient(tls_server.url, TOKEN, timeout=5) as client:
        client._gl.ssl_verify = False
        with pytest.warns(InsecureRequestWarning):  # urllib3 warns, as under requests
            assert client.merge_request(PROJECT, 3).iid == 3


def test_a_missing_ca_bundle_fails_like_requests(tls_server, no_ca_variables, tmp_path):
    missing = str(tmp_path / "absent.pem")
    outcomes = []
    for client in (
        GitLabClient(tls_server.url, TOKEN, timeout=5),
        requests_backed(tls_server.url, timeout=5),
    ):
        client._gl.ssl_verify = missing
        with pytest.raises(OSError) as caught:  # requests raises it outside its hierarchy
            client.merge_request(PROJECT, 3)
        outcomes.append(caught.value)
        client.close()
    assert type(outcomes[0]) is type(outcomes[1]) is OSError
    assert str(outcomes[0]) == str(outcomes[1])
    assert tls_server.received == []
