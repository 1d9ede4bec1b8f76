"""One module per Kafka API, grouped by family (data/, metadata/, groups/, share/, txn/, admin/, controller/,
connection/): `API` (schema Api) and `async def handle(ctx, request)`; found recursively by the dispatch table.

Optional per module: MIN_VERSION/MAX_VERSION, on_startup/on_shutdown(broker) hooks, decode_request/encode_response.
A family's shared helpers live in modules whose name starts with '_' (e.g. share/_share_state.py).
"""
