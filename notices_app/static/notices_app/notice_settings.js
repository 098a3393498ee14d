// The "Notifications" panel of the sessions card: the caller's Discord webhook URL
// (PATCH /api/me/) and "Notify this browser" — a service worker (/sw.js) and a Web Push
// subscription sent to POST /api/me/push-subscriptions/, removed with DELETE. The id the
// server gave this browser's subscription is kept in localStorage, so the toggle shows
// this browser's state, not the account's.

import { api, errorText } from "../sessions_app/api.js";

const panel = document.getElementById("notice-settings");
const discordForm = document.getElementById("discord-form");
const discordUrl = document.getElementById("discord-url");
const pushToggle = document.getElementById("push-toggle");
const status = document.getElementById("notice-settings-status");
const vapidKey = panel.dataset.vapidPublicKey;
const SUBSCRIPTION_KEY = "jarvis.pushSubscriptionId";

function say(text) {
  status.textContent = text;
}

function keyBytes(base64url) {
  const base64 = base64url.replace(/-/g, "+").replace(/_/g, "/");
  const raw = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4));
  return Uint8Array.from(raw, (char) => char.charCodeAt(0));
}

async function load() {
  const result = await api("GET", "/api/me/");
  if (!result.ok) {
    say("Could not load your settings: " + errorText(result));
    return;
  }
  discordUrl.value = result.data.discord_webhook_url;
  const known = result.data.push_subscriptions.map((subscription) => String(subscription.id));
  const mine = localStorage.getItem(SUBSCRIPTION_KEY);
  pushToggle.checked = Boolean(mine && known.includes(mine));
}

async function saveDiscord(event) {
  event.preventDefault();
  const result = await api("PATCH", "/api/me/", { discord_webhook_url: discordUrl.value.trim() });
  say(result.ok ? "Saved." : "Not saved: " + errorText(result));
}

async function subscribe() {
  if (Notification.permission !== "granted" && (await Notification.requestPermission()) !== "granted") {
    throw new Error("notifications are blocked for this site");
  }
  const registration = await navigator.serviceWorker.register("/sw.js");
  await navigator.serviceWorker.ready;
  const subscription = await registration.pushManager.subscribe({
    userVisibleOnly: true,
    applicationServerKey: keyBytes(vapidKey),
  });
  const result = await api("POST", "/api/me/push-subscriptions/", subscription.toJSON());
  if (!result.ok) {
    await subscription.unsubscribe();
    throw new Error(errorText(result));
  }
  localStorage.setItem(SUBSCRIPTION_KEY, String(result.data.id));
}

async function unsubscribe() {
  const id = localStorage.getItem(SUBSCRIPTION_KEY);
  if (id) {
    const result = await api("DELETE", "/api/me/push-subscriptions/" + encodeURIComponent(id) + "/");
    if (!result.ok && result.status !== 404) throw new Error(errorText(result));
    localStorage.removeItem(SUBSCRIPTION_KEY);
  }
  const registration = await navigator.serviceWorker.getRegistration("/");
  const subscription = registration && (await registration.pushManager.getSubscription());
  if (subscription) await subscription.unsubscribe();
}

async function togglePush() {
  pushToggle.disabled = true;
  const wanted = pushToggle.checked;
  try {
    await (wanted ? subscribe() : unsubscribe());
    say(wanted ? "This browser will be notified." : "This browser will not be notified.");
  } catch (error) {
    pushToggle.checked = !wanted;
    say("Not changed: " + error.message);
  } finally {
    pushToggle.disabled = false;
  }
}

discordForm.addEventListener("submit", saveDiscord);
if (!vapidKey || !("serviceWorker" in navigator) || !("PushManager" in window)) {
  pushToggle.disabled = true;
  say(vapidKey ? "This browser cannot receive push notifications." : "Push notifications are not set up on this server.");
} else {
  pushToggle.addEventListener("change", togglePush);
}
load();
