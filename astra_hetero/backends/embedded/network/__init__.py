"""The network model: routes, max-min fair flows, and the collective models that plan phases on them."""
