// The page's service worker (served at /sw.js so that its scope is the whole site): shows a
// notice pushed by the server (docs/design.md §16) while no tab is open, and opens its
// conversation when the notification is clicked. The payload is {session_id, message_id,
// content}; the browser has already decrypted it.

self.addEventListener("push", (event) => {
  let notice = {};
  try {
    notice = event.data ? event.data.json() : {};
  } catch (error) {
    notice = { content: event.data ? event.data.text() : "" };
  }
  event.waitUntil(
    self.registration.showNotification("Jarvis", {
      body: notice.content || "",
      tag: notice.message_id || undefined,
      data: { session_id: notice.session_id || "" },
    }),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const sessionId = event.notification.data && event.notification.data.session_id;
  const url = sessionId ? "/?session=" + encodeURIComponent(sessionId) : "/";
  event.waitUntil(self.clients.openWindow(url));
});
