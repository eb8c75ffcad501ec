// What the pages once did inline, now allowed by the Content-Security-Policy (scripts from /static only,
// no inline handlers or style attributes): colours and bar positions come as data-* attributes and are
// set through the CSSOM; the token-colour radios and the play form's config menu get their listeners here.
(function () {
  for (const e of document.querySelectorAll(".tok[data-lp]")) {
    e.style.setProperty("--lp", e.dataset.lp);
    if (e.dataset.w) e.style.setProperty("--w", e.dataset.w);
  }
  for (const e of document.querySelectorAll("[data-left]")) e.style.left = e.dataset.left + "%";
  for (const e of document.querySelectorAll("[data-width]")) e.style.width = e.dataset.width + "%";
  for (const e of document.querySelectorAll("[data-bg]")) e.style.background = e.dataset.bg;
  for (const e of document.querySelectorAll("input[name=colour]")) {
    e.addEventListener("change", () => { document.body.dataset.colour = e.value; });
  }
  for (const e of document.querySelectorAll("select[data-autosubmit]")) {
    e.addEventListener("change", () => e.form.submit());
  }
})();
