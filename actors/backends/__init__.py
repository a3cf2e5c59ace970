"""Backend side: one actor per configured backend, its connection (the in-flight table) and its transports."""
