// The dashboard's only script: pages work without it; it adds copy buttons and refreshes a
// running job's page. Loaded from the dashboard's own origin (the CSP allows no inline script).

document.addEventListener('click', (event) => {
  const button = event.target instanceof Element ? event.target.closest('[data-copy]') : null;
  if (button === null) return;
  const field = document.getElementById(button.getAttribute('data-copy'));
  if (field === null) return;
  field.select();
  const done = () => {
    button.textContent = 'Copied';
  };
  // The selected text can still be copied by hand when neither way is allowed.
  const fallback = () => {
    if (document.execCommand('copy')) done();
    else button.textContent = 'Press Ctrl+C to copy';
  };
  if (navigator.clipboard) navigator.clipboard.writeText(field.value).then(done, fallback);
  else fallback();
});

// A job still running reloads its page every few seconds until it is finished.
const running = document.querySelector('[data-refresh-while-running]');
if (running !== null) {
  const seconds = Number(running.getAttribute('data-refresh-while-running')) || 5;
  setTimeout(() => window.location.reload(), seconds * 1000);
}
