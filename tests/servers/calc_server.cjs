// The tests' own MCP server over stdio, on the official TypeScript SDK: the same tools, schemas and results as
// calc_server.py (the Python SDK's), at a fraction of its start (Node.js starts this in ~0.3 s of CPU; the `mcp`
// package's import alone takes ~1.2 s). Most tests start many: tests/servers/__init__.py says which one they get.
// The SDK is the one tests/npm_servers.py installs (pinned) under <repo>/.cache/npm-servers.
"use strict";
const path = require("node:path");

const sdk = path.join(__dirname, "..", "..", ".cache", "npm-servers", "node_modules", "@modelcontextprotocol", "sdk",
  "dist", "cjs");
const { Server } = require(path.join(sdk, "server", "index.js"));
const { StdioServerTransport } = require(path.join(sdk, "server", "stdio.js"));
const {
  CallToolRequestSchema, ListPromptsRequestSchema, ListResourcesRequestSchema, ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
} = require(path.join(sdk, "types.js"));

// name -> [description, {argument: JSON type}, result's JSON type], in calc_server.py's order
const TOOLS = {
  add: ["Add two integers.", { a: "integer", b: "integer" }, "integer"],
  echo: ["Return the text unchanged.", { text: "string" }, "string"],
  server_pid: ["The process id of this server (tests use it to tell connections apart).", {}, "integer"],
  sleep: ["Sleep, then say so.", { seconds: "number" }, "string"],
  crash: ["Kill this server process at once, as a crash would.", {}, "string"],
  fail: ["Raise an error inside the tool.", { message: "string" }, "string"],
};

const title = (name) => name.charAt(0).toUpperCase() + name.slice(1);

// The schemas as the Python SDK derives them from calc_server.py's signatures (titles included), so that both
// servers offer the very same tools.
function listed(name) {
  const [description, args, result] = TOOLS[name];
  const properties = Object.fromEntries(Object.entries(args).map(([arg, type]) => [arg, { title: title(arg), type }]));
  const inputSchema = { properties, type: "object", title: `${name}Arguments` };
  if (Object.keys(args).length) inputSchema.required = Object.keys(args);
  return {
    description,
    inputSchema,
    name,
    outputSchema: { properties: { result: { title: "Result", type: result } }, required: ["result"], type: "object",
      title: `${name}Output` },
  };
}

// A float as Python prints it (`f"{1.0}"` is "1.0"), for `sleep`'s answer.
const pythonFloat = (value) => (Number.isInteger(value) ? value.toFixed(1) : String(value));

function wrongArguments(name, args) {
  const [, expected] = TOOLS[name];
  const wrong = Object.entries(expected).filter(([arg, type]) => {
    const value = args[arg];
    if (type === "integer") return !Number.isInteger(value);
    if (type === "number") return typeof value !== "number";
    return typeof value !== type;
  });
  return wrong.map(([arg]) => arg);
}

async function call(name, args) {
  switch (name) {
    case "add": return args.a + args.b;
    case "echo": return args.text;
    case "server_pid": return process.pid;
    case "sleep":
      await new Promise((resolve) => setTimeout(resolve, args.seconds * 1000));
      return `slept ${pythonFloat(args.seconds)}`;
    case "crash": process.exit(3);
    case "fail": throw new Error(args.message);
  }
}

// the capabilities the Python SDK's server announces (no prompts or resources in it, all the same)
const server = new Server({ name: "calc", version: "" }, {
  capabilities: {
    prompts: { listChanged: false }, resources: { listChanged: false, subscribe: false }, tools: { listChanged: false },
  },
});
server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: [] }));
server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: [] }));
server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: [] }));
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: Object.keys(TOOLS).map(listed) }));
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const { name } = request.params;
  const args = request.params.arguments ?? {};
  const error = (text) => ({ content: [{ type: "text", text }], isError: true });
  if (!(name in TOOLS)) return error(`Unknown tool: ${name}`);
  const wrong = wrongArguments(name, args);
  if (wrong.length) return error(`Error executing tool ${name}: invalid arguments: ${wrong.join(", ")}`);
  try {
    const result = await call(name, args);
    return { content: [{ type: "text", text: String(result) }], isError: false, structuredContent: { result } };
  } catch {
    return error(`Error executing tool ${name}`);  // as the Python SDK says it: the exception's text stays inside
  }
});
server.connect(new StdioServerTransport());
