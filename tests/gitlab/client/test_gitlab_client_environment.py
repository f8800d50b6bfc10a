"""The environment requests would read on every call (proxies, no_proxy, CA bundle) is
read once, when the client is built, with the same effect on its calls."""

from __future__ import annotations

import gitlab
import pytest
from gitlab_client_support import PROJECT, TOKEN

from workqueue.gitlab import GitLabClient, RetryableGitLabError

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def test_a_proxy_from_the_environment_is_still_used(
    make_client, project_id, closed_port, clean_environment
):
    clean_environment.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port}")
    client = make_client()
    with pytest.raises(RetryableGitLabError) as caught:
        client.project(PROJECT)  # through the proxy, which refuses the connection
    assert caught.value.message.startswith("ProxyError: ")


def test_no_proxy_still_exempts_the_gitlab_host(
    make_client, project_id, closed_port, clean_environment
):
    clean_environment.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port}")
    clean_environment.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert make_client().project(PROJECT).id == project_id


def test_the_environment_is_read_when_the_client_is_built(
    make_client, project_id, closed_port, clean_environment
):
    client = make_client()
    clean_environment.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port}")
    assert client.project(PROJECT).id == project_id  # no proxy when it was built


def test_the_ca_bundle_from_the_environment_is_kept(sim, clean_environment):
    clean_environment.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/our-bundle.pem")
    with GitLabClient(sim.url, TOKEN) as client:
        gl = client._gl  # what requests will verify with
        assert gl.ssl_verify == "/etc/ssl/certs/our-bundle.pem"
        assert gl.session.trust_env is False


def test_a_prebuilt_python_gitlab_is_left_as_it_is(sim):
    gl = gitlab.Gitlab(sim.url, private_token=TOKEN)
    with GitLabClient(sim.url, TOKEN, gl=gl):
        assert gl.session.trust_env is True
        assert gl.ssl_verify is True
