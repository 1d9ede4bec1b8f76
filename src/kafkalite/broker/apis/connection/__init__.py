"""The APIs of a connection's opening exchange: ApiVersions (what this broker speaks), SaslHandshake and
SaslAuthenticate (who the client is), answered before any other request is authorized.
"""
