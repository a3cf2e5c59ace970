# The Trio MCP Gateway in a container.
#   docker build -t mcp-gateway .
#   export GATEWAY_JWT_SECRET="$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
#   docker run --init --rm -p 127.0.0.1:8765:8765 -p 127.0.0.1:8766:8766 -e GATEWAY_JWT_SECRET mcp-gateway
#   docker run --rm -e GATEWAY_JWT_SECRET mcp-gateway token --sub alice     # a token for a client
# The default config is config/docker.toml; mount your own at /etc/mcp-gateway/gateway.toml (every command
# reads that file unless given --config: MCP_GATEWAY_CONFIG below). Start it from config/docker.toml: a
# listener on 127.0.0.1 inside a container is unreachable from outside it.
# For an editor (stdio, no listener, no secret; exits when the editor closes stdin): config/docker-stdio.toml,
#   docker run -i --rm --init -v mcp-gateway-data:/var/lib/mcp-gateway mcp-gateway serve --stdio --config /etc/mcp-gateway/stdio.toml
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MCP_GATEWAY_CONFIG=/etc/mcp-gateway/gateway.toml

RUN useradd --system --user-group --create-home --home-dir /var/lib/mcp-gateway \
        --shell /usr/sbin/nologin mcp-gateway

# Only what `pip install .` needs (pyproject.toml names README.md as the readme); the sources go after.
COPY pyproject.toml README.md LICENSE /src/
COPY actors /src/actors
COPY mcp_gateway_examples /src/mcp_gateway_examples
RUN pip install /src && rm -rf /src

# The default config and the editors' one (the demo backends they run were installed with the package above).
COPY config/docker.toml /etc/mcp-gateway/gateway.toml
COPY config/docker-stdio.toml /etc/mcp-gateway/stdio.toml

USER mcp-gateway
WORKDIR /var/lib/mcp-gateway
VOLUME ["/var/lib/mcp-gateway"]

# 8765: [websocket], 8766: [http] (config/docker.toml).
EXPOSE 8765 8766

# When the admin listener ([admin], GET /healthz) is in the config, and its port exposed:
# HEALTHCHECK --interval=30s --timeout=5s CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8767/healthz', timeout=4)"]

# SIGTERM: calls in flight are answered and backends stopped within [gateway] shutdown_s.
STOPSIGNAL SIGTERM
ENTRYPOINT ["mcp-gateway"]
CMD ["serve", "--config", "/etc/mcp-gateway/gateway.toml"]
