// The sessions card as a drawer on narrow screens: a button opens it over the conversation,
// Escape, the close button or a tap beside it closes it, and focus goes where a keyboard user
// expects. On wide screens the card is always shown and none of this applies.

const NARROW = window.matchMedia("(max-width: 800px)");

export function setupDrawer({ toggle, drawer, closeButton, backdrop, behind }) {
  const isOpen = () => document.body.classList.contains("drawer-open");

  function setOpen(open) {
    document.body.classList.toggle("drawer-open", open);
    toggle.setAttribute("aria-expanded", String(open));
    backdrop.hidden = !open;
    // While the drawer covers the page, what is behind it can be neither clicked nor tabbed to.
    for (const node of behind) node.inert = open;
  }

  function open() {
    setOpen(true);
    // Focus lands on the open conversation in the list, or else the drawer's first control.
    const target = drawer.querySelector(".session-item.current a") || drawer.querySelector("button");
    if (target) target.focus();
  }

  function close({ restoreFocus = false } = {}) {
    if (!isOpen()) return;
    setOpen(false);
    if (restoreFocus) toggle.focus();
  }

  toggle.addEventListener("click", () => (isOpen() ? close({ restoreFocus: true }) : open()));
  closeButton.addEventListener("click", () => close({ restoreFocus: true }));
  backdrop.addEventListener("click", () => close({ restoreFocus: true }));
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && isOpen()) close({ restoreFocus: true });
  });
  NARROW.addEventListener("change", () => close());
  return { close };
}
