// The person's sessions list follows every change, made in any tab or on any device
// (docs/design.md §24): one `/ws/me/` socket per tab, and each `session_changed` frame
// refreshes the list. A socket that reconnects refreshes once too, for what it missed.

const FIRST_RETRY_MS = 500;
const LAST_RETRY_MS = 30000;
const CLOSE_UNAUTHENTICATED = 4401;

export function followSessionChanges(onChange) {
  let delay = FIRST_RETRY_MS;
  let opened = false;
  const open = () => {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(scheme + "//" + location.host + "/ws/me/");
    socket.addEventListener("open", () => {
      delay = FIRST_RETRY_MS;
      if (opened) onChange(null);
      opened = true;
      document.body.dataset.liveList = "open";
    });
    socket.addEventListener("message", (message) => {
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch (error) {
        return;
      }
      if (frame && frame.type === "session_changed") onChange(frame);
    });
    socket.addEventListener("close", (closeEvent) => {
      document.body.dataset.liveList = "closed";
      if (closeEvent.code === CLOSE_UNAUTHENTICATED) return; // signed out: the page goes too
      setTimeout(open, delay);
      delay = Math.min(delay * 2, LAST_RETRY_MS);
    });
  };
  open();
}
