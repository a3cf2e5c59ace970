// The official MCP TypeScript SDK as a WebSocket client of the gateway: list tools, call echo and add,
// print one JSON line with what came back. Usage: node ts_ws_client.mjs ws://127.0.0.1:PORT/mcp
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { WebSocketClientTransport } from "@modelcontextprotocol/sdk/client/websocket.js";

const url = process.argv[2];
if (!url) {
  console.error("usage: node ts_ws_client.mjs ws://host:port/path");
  process.exit(2);
}

try {
  const client = new Client({ name: "typescript-interop", version: "0.0.0" });
  await client.connect(new WebSocketClientTransport(new URL(url)));
  const tools = await client.listTools();
  const echo = await client.callTool({ name: "echo", arguments: { text: "from typescript" } });
  const add = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  console.log(JSON.stringify({
    serverName: client.getServerVersion()?.name,
    tools: tools.tools.map((tool) => tool.name),
    echo: echo.structuredContent,
    add: add.structuredContent,
  }));
  await client.close();
  process.exit(0);
} catch (error) {
  console.error(error?.stack ?? String(error));
  process.exit(1);
}
