// The dashboard's behaviour on top of htmx: a token pasted once per tab, sent as a header.
// The token lives in sessionStorage (this tab only, gone when it closes) and is added to
// the dashboard's own requests; it never goes into a URL, a cookie or the page.
(function () {
  "use strict";
  var KEY = "workqueue-service.token";

  function storedToken() {
    try {
      return window.sessionStorage.getItem(KEY);
    } catch (error) {
      return null; // storage disabled: only the proxy or the local user can sign in
    }
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

  function signInFromProxy(panel) {
    var result = panel.querySelector("[data-proxy-result]");
    fetch(rootPath() + "/api/work-items/me", { credentials: "same-origin" })
      .then(function (response) {
        return response.ok ? response.json() : null;
      })
      .then(function (body) {
        if (body && body.token) {
          rememberToken(body.token);
          loadThisPage();
        } else {
          result.textContent = "No proxy session here: paste a token instead.";
        }
      })
      .catch(function () {
        result.textContent = "The proxy could not be reached.";
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
      signInFromProxy(panel);
    });
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
