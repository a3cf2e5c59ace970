// The official MCP TypeScript SDK as a WebSocket client of the gateway: initialize, list tools, call echo and
// add, print one JSON line with what came back, close. Exit 1 (error on stderr) on any failure.
// Usage: node ts_ws_client.mjs ws://127.0.0.1:PORT/mcp   (needs a global WebSocket: Node >= 22)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { WebSocketClientTransport } from "@modelcontextprotocol/sdk/client/websocket.js";

const url = process.argv[2];
if (!url) {
  console.error("usage: node ts_ws_client.mjs ws://host:port/path");
  process.exit(2);
}

try {
  if (typeof globalThis.WebSocket !== "function") {
    throw new Error(`no global WebSocket in Node ${process.version}; WebSocketClientTransport needs Node >= 22`);
  }
  const transport = new WebSocketClientTransport(new URL(url));
  // Client has no getter for the negotiated version; it hands it to a transport's optional setProtocolVersion.
  let protocolVersion;
  transport.setProtocolVersion = (version) => {
    protocolVersion = version;
  };
  const client = new Client({ name: "typescript-interop", version: "0.0.0" });
  await client.connect(transport);
  const tools = await client.listTools();
  const echo = await client.callTool({ name: "echo", arguments: { text: "from typescript" } });
  const add = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  for (const [name, result] of [["echo", echo], ["add", add]]) {
    if (result.isError) throw new Error(`tool ${name} failed: ${JSON.stringify(result.content)}`);
  }
  await client.close();
  const report = {
    serverName: client.getServerVersion()?.name,
    protocolVersion,
    tools: tools.tools.map((tool) => tool.name),
    echo: echo.structuredContent,
    add: add.structuredContent,
  };
  process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(0));
} catch (error) {
  console.error(error?.stack ?? String(error));
  process.exit(1);
}
