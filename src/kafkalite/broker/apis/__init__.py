"""One module per Kafka API: `API` (schema Api) and `async def handle(ctx, request)`; found by the dispatch table.

Optional per module: MIN_VERSION/MAX_VERSION, on_startup/on_shutdown(broker) hooks, decode_request/encode_response.
"""
