// Exchange an API token for the session cookies, then go where the user was headed.
const form = document.getElementById("login-form");
const error = document.getElementById("login-error");
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
    location.assign(document.body.dataset.next || "/ui/jobs");
    return;
  }
  const data = await response.json().catch(() => ({}));
  error.textContent = typeof data.detail === "string" ? data.detail : "login failed";
  error.hidden = false;
});
