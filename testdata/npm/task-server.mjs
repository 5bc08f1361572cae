// A stdio MCP server built on the official TypeScript SDK's task support, for the Go
// tests of tasks that do not end well (internal/mcpproxy/task_test.go): every tool
// requires task augmentation (taskSupport "required").
//   ask     the task asks for input (input_required, an elicitation through
//           tasks/result) and waits for it without end
//   break   the task fails after 300 ms, with a status message
//   refuse  the task fails with a stored result (isError, a content block)
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from "@modelcontextprotocol/sdk/experimental/tasks";
import { ElicitResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const server = new McpServer({ name: "task-server", version: "0" }, {
  capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
  taskStore: new InMemoryTaskStore(),
  taskMessageQueue: new InMemoryTaskMessageQueue(),
});

const handlers = (run) => ({
  createTask: async (args, extra) => {
    const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 200 });
    setTimeout(() => run(task.taskId, extra).catch((e) => console.error(`task ${task.taskId}:`, e)), 0);
    return { task };
  },
  getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
  getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
});

const config = (description) => ({ description, inputSchema: { note: z.string().optional() }, execution: { taskSupport: "required" } });

server.experimental.tasks.registerToolTask("ask", config("Asks for input and waits for it."),
  handlers(async (taskId, extra) => {
    await extra.taskStore.updateTaskStatus(taskId, "input_required", "Which dataset should be used?");
    try {
      const answer = await extra.sendRequest({
        method: "elicitation/create",
        params: { message: "Which dataset?", requestedSchema: { type: "object", properties: { name: { type: "string" } } } },
      }, ElicitResultSchema, { relatedTask: { taskId } });
      console.error(`ask: answered ${JSON.stringify(answer)}`);
    } catch (e) {
      console.error(`ask: elicitation failed: ${e.message}`);
    }
    // Waits for input without end: only tasks/cancel ends the task.
  }));

server.experimental.tasks.registerToolTask("break", config("Fails after 300 ms."),
  handlers(async (taskId, extra) => {
    await extra.taskStore.updateTaskStatus(taskId, "working", "Reading the index...");
    await new Promise((r) => setTimeout(r, 300));
    await extra.taskStore.updateTaskStatus(taskId, "failed", "the index is corrupt");
  }));

server.experimental.tasks.registerToolTask("refuse", config("Fails with a result."),
  handlers(async (taskId, extra) => {
    await extra.taskStore.storeTaskResult(taskId, "failed", { content: [{ type: "text", text: "quota exceeded for today" }], isError: true });
  }));

await server.connect(new StdioServerTransport());
