"""Memory grown from session turns. Rows refer to sessions by id only (DESIGN §9)."""
