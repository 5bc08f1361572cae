// Command echoserver is the fast upstream of the mcpcompare benchmark: an MCP server
// over stdio (mark3labs/mcp-go) with one tool, echo {message}, that answers
// "Echo: <message>" like @modelcontextprotocol/server-everything's echo and costs
// next to nothing, so that what a proxy in front of it adds is what gets measured.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	s := server.NewMCPServer("mcpcompare-echo", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Echoes back the input string"),
		mcp.WithString("message", mcp.Required(), mcp.Description("Message to echo")),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		msg, err := req.RequireString("message")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText("Echo: " + msg), nil
	})
	// Enough workers that 32 concurrent callers never queue behind each other.
	if err := server.ServeStdio(s, server.WithWorkerPoolSize(32), server.WithQueueSize(1024)); err != nil {
		fmt.Fprintln(os.Stderr, "echoserver:", err)
		os.Exit(1)
	}
}
