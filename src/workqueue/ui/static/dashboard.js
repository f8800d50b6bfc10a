// The dashboard's behaviour on top of htmx: a token pasted once per tab, sent as a header.
// The token lives in sessionStorage (this tab only, gone when it closes) and is added to
// the dashboard's own requests; it never goes into a URL, a cookie or the page.
(function () {
  "use strict";
  var KEY = "workqueue-service.token";

  function stored(key) {
    try {
      return window.sessionStorage.getItem(key);
    } catch (error) {
      return null; // storage disabled: only a proxy in front or the local user can sign in
    }
  }

  function storedToken() {
    return stored(KEY);
  }

  function forgetToken() {
    try {
      window.sessionStorage.removeItem(KEY);
    } catch (error) {
      // nothing stored
    }
  }

  function rememberToken(token) {
    window.sessionStorage.setItem(KEY, token);
  }

  function isOwnOrigin(path) {
    return new URL(path, window.location.href).origin === window.location.origin;
  }

  function rootPath() {
    return document.body.getAttribute("data-root") || "";
  }

  document.addEventListener("htmx:configRequest", function (event) {
    var token = storedToken();
    if (token && isOwnOrigin(event.detail.path)) {
      event.detail.headers["Authorization"] = "Bearer " + token;
    }
  });

  // Back and forward fetch the page again (nothing is cached): with the token too.
  document.addEventListener("htmx:historyCacheMiss", function (event) {
    var token = storedToken();
    if (token) {
      event.detail.xhr.setRequestHeader("Authorization", "Bearer " + token);
    }
  });

  function loadThisPage() {
    htmx.ajax("GET", window.location.pathname + window.location.search, {
      target: "#content",
      swap: "innerHTML",
    });
  }

  function showForgetButton() {
    var button = document.getElementById("forget-token");
    if (button) {
      button.hidden = !storedToken();
    }
  }

  // The OAuth proxy hands a signed-in browser its token at /api/work-items/me. Without a
  // proxy session the proxy answers with its sign-in (a redirect or an HTML page): go
  // there, and ask /me once more when the browser comes back to this page.
  var PROXY_PENDING = "workqueue-service.proxy-sign-in";

  function signInFromProxy(panel, afterReturn) {
    var result = panel.querySelector("[data-proxy-result]");
    fetch(rootPath() + "/api/work-items/me", { credentials: "same-origin", redirect: "manual" })
      .then(function (response) {
        var json = (response.headers.get("content-type") || "").indexOf("application/json") === 0;
        if (response.ok && json) {
          return response.json().then(function (body) {
            rememberToken(body.token);
            loadThisPage();
          });
        }
        if (!afterReturn && (response.type === "opaqueredirect" || !json)) {
          window.sessionStorage.setItem(PROXY_PENDING, "1");
          var here = window.location.pathname + window.location.search;
          window.location.assign(rootPath() + "/oauth/start?rd=" + encodeURIComponent(here));
          return null;
        }
        result.textContent = "No OAuth proxy session here: paste a token instead.";
        return null;
      })
      .catch(function () {
        result.textContent = "The OAuth proxy could not be reached: paste a token instead.";
      });
  }

  function setUpSignIn(panel) {
    if (panel.hasAttribute("data-rejected")) {
      forgetToken();
    } else if (storedToken()) {
      loadThisPage();
      return;
    }
    var form = panel.querySelector("form");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var token = form.elements.token.value.trim();
      if (token) {
        rememberToken(token);
        form.reset();
        loadThisPage();
      }
    });
    panel.querySelector("[data-proxy-sign-in]").addEventListener("click", function () {
      signInFromProxy(panel, false);
    });
    if (stored(PROXY_PENDING)) {
      window.sessionStorage.removeItem(PROXY_PENDING);
      signInFromProxy(panel, true);
    }
  }

  htmx.onLoad(function (root) {
    showForgetButton();
    if (!root.querySelectorAll) {
      return;
    }
    var panels = root.matches("[data-sign-in]") ? [root] : root.querySelectorAll("[data-sign-in]");
    Array.prototype.forEach.call(panels, setUpSignIn);
  });

  document.addEventListener("click", function (event) {
    if (event.target && event.target.id === "forget-token") {
      forgetToken();
      window.location.reload();
    }
  });
})();
