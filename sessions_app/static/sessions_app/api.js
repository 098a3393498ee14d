// The JSON API (docs/api.md) as the page uses it: session cookie plus the CSRF token.

function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

export function loginUrl() {
  return "/accounts/login/?next=" + encodeURIComponent(location.pathname + location.search);
}

// The page leaves for the sign-in page once. Signing out, or deleting the account, closes
// the sockets and fails the requests in flight; each would start its own navigation, and a
// second one aborts the first half-way.
let leaving = false;

export function goToLogin(url = loginUrl()) {
  if (leaving) return;
  leaving = true;
  window.location.href = url;
}

export async function api(method, path, body) {
  const options = {
    method,
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  };
  if (method !== "GET") {
    options.headers["X-CSRFToken"] = csrfToken();
  }
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, options);
  } catch (error) {
    return { status: 0, ok: false, data: { detail: "the server cannot be reached" } };
  }
  let data = null;
  try {
    data = await response.json();
  } catch (error) {
    data = null;
  }
  if ((response.status === 401 || response.status === 403) && data && data.code === "not_authenticated") {
    goToLogin();
  }
  return { status: response.status, ok: response.ok, data };
}

export const sessionPath = (id) => "/api/sessions/" + encodeURIComponent(id) + "/";

export function errorText(result) {
  if (result.data && result.data.detail) {
    return result.data.detail + (result.data.code ? " (" + result.data.code + ")" : "");
  }
  return "the server answered " + result.status;
}
