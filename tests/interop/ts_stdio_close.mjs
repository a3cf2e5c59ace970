// The official MCP TypeScript SDK v1 as a stdio client that quits: it starts the gateway itself
// (StdioClientTransport), calls the tools it is given, prints one JSON line {"gateway": pid, "pids": [...]},
// waits for a line on its own stdin (the test has noted the gateway's processes), then closes the client the
// SDK's way (stdin ended, 2 s, SIGTERM, 2 s, SIGKILL) and prints {"closed": true}. Exit 1 on any failure.
// Usage: node ts_stdio_close.mjs '["python", "-m", "actors", ...]' '[["tool", {arguments}], ...]' cwd
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const write = (value) => new Promise((resolve) => process.stdout.write(`${JSON.stringify(value)}\n`, resolve));

try {
  const [command, ...args] = JSON.parse(process.argv[2]);
  const calls = JSON.parse(process.argv[3]);
  const transport = new StdioClientTransport({ command, args, cwd: process.argv[4], stderr: "inherit" });
  const client = new Client({ name: "typescript-stdio-close", version: "0.0.0" });
  await client.connect(transport);
  const pids = [];
  for (const [name, toolArguments] of calls) {
    const result = await client.callTool({ name, arguments: toolArguments });
    if (result.isError) throw new Error(`tool ${name} failed: ${JSON.stringify(result.content)}`);
    pids.push(result.structuredContent.pid);
  }
  await write({ gateway: transport.pid, pids });
  const lines = createInterface({ input: process.stdin });
  for await (const _line of lines) break;
  await client.close();
  await write({ closed: true });
  process.exit(0);
} catch (error) {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
}
