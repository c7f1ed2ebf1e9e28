// Exchange an API token for the session cookies, then go where the user was headed.
import { cookie } from "./api.js";

const form = document.getElementById("login-form");
const error = document.getElementById("login-error");

function showLoginError(text) {
  error.textContent = text;
  error.hidden = false;
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.hidden = true;
  const response = await fetch("/ui/session", {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ token: document.getElementById("token").value }),
  });
  if (response.ok) {
    // Read the (empty) body first: navigating while the request is still finishing aborts it, which the
    // browser tests saw as a failed request on a loaded machine.
    await response.arrayBuffer();
    // The farm set the cookies, but a browser keeps Secure ones only over https (or for cookies blocked
    // for this site, none): going on would land on this login again, with no word of why.
    if (!cookie("kf_csrf")) {
      showLoginError("The token was accepted, but this browser did not keep the session cookie. This farm sets " +
        "Secure cookies (KERNELFARM_SESSION_COOKIE_SECURE), which a browser keeps only over https: open the " +
        `dashboard at its https:// address${location.protocol === "http:" ? " instead of http://" : ""}, ` +
        "and check that this browser accepts cookies from this site.");
      return;
    }
    location.assign(document.body.dataset.next || "/ui/jobs");
    return;
  }
  const data = await response.json().catch(() => ({}));
  showLoginError(typeof data.detail === "string" ? data.detail : "login failed");
});
