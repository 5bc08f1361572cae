package mcpproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	ossignal "os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// goSDKServerEnv makes the test binary an MCP server written with the official Go
// SDK (github.com/modelcontextprotocol/go-sdk), serving the transport it names:
// stdio, http (streamable HTTP, stateful), http-stateless, http-json (stateful,
// answering POSTs with JSON rather than an event stream) or sse. An HTTP server
// listens on 127.0.0.1:$TOOLSERVERD_GOSDK_PORT (0 if unset) and prints its URL as
// the first line of stdout. Lines the server writes to $TOOLSERVERD_GOSDK_NOTES
// (one per event: "cancelled wait", "protocol 2025-11-25") tell a test what it saw.
const goSDKServerEnv = "TOOLSERVERD_GOSDK_SERVER"

type sdkAddIn struct {
	A    int    `json:"a" jsonschema:"the first addend"`
	B    int    `json:"b" jsonschema:"the second addend"`
	Unit string `json:"unit,omitempty" jsonschema:"what is added"`
}

type sdkAddOut struct {
	Sum  int    `json:"sum"`
	Unit string `json:"unit,omitempty"`
}

type sdkNoIn struct{}

type sdkStepsIn struct {
	Steps   int `json:"steps" jsonschema:"how many progress notifications to send"`
	DelayMS int `json:"delay_ms,omitempty" jsonschema:"how long to wait after each"`
}

// sdkPNG is a 1x1 PNG.
var sdkPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func newGoSDKServer(note func(string), keepAlive time.Duration) *gosdk.Server {
	s := gosdk.NewServer(&gosdk.Implementation{Name: "gosdk-test", Version: "1.0.0"}, &gosdk.ServerOptions{
		InitializedHandler: func(_ context.Context, req *gosdk.InitializedRequest) {
			note("protocol " + req.Session.InitializeParams().ProtocolVersion)
		},
		KeepAlive: keepAlive,
	})
	gosdk.AddTool(s, &gosdk.Tool{Name: "add", Description: "Adds two integers."},
		func(_ context.Context, _ *gosdk.CallToolRequest, in sdkAddIn) (*gosdk.CallToolResult, sdkAddOut, error) {
			return nil, sdkAddOut{Sum: in.A + in.B, Unit: in.Unit}, nil
		})
	gosdk.AddTool(s, &gosdk.Tool{Name: "steps", Description: "Reports progress, then answers."},
		func(ctx context.Context, req *gosdk.CallToolRequest, in sdkStepsIn) (*gosdk.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			note(fmt.Sprintf("steps token=%v", tok != nil))
			for i := range in.Steps {
				if tok != nil {
					_ = req.Session.NotifyProgress(ctx, &gosdk.ProgressNotificationParams{
						ProgressToken: tok, Progress: float64(i + 1), Total: float64(in.Steps),
						Message: fmt.Sprintf("step %d", i+1)})
				}
				time.Sleep(time.Duration(in.DelayMS) * time.Millisecond)
			}
			return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: fmt.Sprintf("%d steps", in.Steps)}}}, nil, nil
		})
	gosdk.AddTool(s, &gosdk.Tool{Name: "wait", Description: "Waits until cancelled."},
		func(ctx context.Context, _ *gosdk.CallToolRequest, _ sdkNoIn) (*gosdk.CallToolResult, any, error) {
			note("waiting")
			select {
			case <-ctx.Done():
				note("cancelled wait")
				return nil, nil, ctx.Err()
			case <-time.After(time.Minute):
				return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: "waited"}}}, nil, nil
			}
		})
	gosdk.AddTool(s, &gosdk.Tool{Name: "media", Description: "Answers with every kind of content."},
		func(context.Context, *gosdk.CallToolRequest, sdkNoIn) (*gosdk.CallToolResult, any, error) {
			return &gosdk.CallToolResult{Content: []gosdk.Content{
				&gosdk.TextContent{Text: "here"},
				&gosdk.ImageContent{Data: sdkPNG, MIMEType: "image/png"},
				&gosdk.AudioContent{Data: []byte("RIFF....WAVE"), MIMEType: "audio/wav"},
				&gosdk.ResourceLink{URI: "file:///srv/report.txt", Name: "report.txt", MIMEType: "text/plain"},
				&gosdk.EmbeddedResource{Resource: &gosdk.ResourceContents{URI: "mem://note", MIMEType: "text/plain", Text: "embedded words"}},
			}}, nil, nil
		})
	gosdk.AddTool(s, &gosdk.Tool{Name: "broken", Description: "Always fails."},
		func(context.Context, *gosdk.CallToolRequest, sdkNoIn) (*gosdk.CallToolResult, any, error) {
			return nil, nil, errors.New("the widget is broken")
		})
	gosdk.AddTool(s, &gosdk.Tool{Name: "grow", Description: "Adds the tool extra."},
		func(context.Context, *gosdk.CallToolRequest, sdkNoIn) (*gosdk.CallToolResult, any, error) {
			gosdk.AddTool(s, &gosdk.Tool{Name: "extra", Description: "Added at run time."},
				func(context.Context, *gosdk.CallToolRequest, sdkNoIn) (*gosdk.CallToolResult, any, error) {
					return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: "extra here"}}}, nil, nil
				})
			return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: "grown"}}}, nil, nil
		})
	gosdk.AddTool(s, &gosdk.Tool{Name: "ask", Description: "Asks the client things: roots, an elicitation, a sample."},
		func(ctx context.Context, req *gosdk.CallToolRequest, _ sdkNoIn) (*gosdk.CallToolResult, any, error) {
			var said []string
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			t0 := time.Now()
			_, err := req.Session.ListRoots(ctx, nil)
			said = append(said, fmt.Sprintf("roots: %v (%s)", err, time.Since(t0).Round(time.Millisecond)))
			t0 = time.Now()
			_, err = req.Session.Elicit(ctx, &gosdk.ElicitParams{Message: "ok?", RequestedSchema: &jsonschema.Schema{Type: "object"}})
			said = append(said, fmt.Sprintf("elicit: %v (%s)", err, time.Since(t0).Round(time.Millisecond)))
			t0 = time.Now()
			_, err = req.Session.CreateMessage(ctx, &gosdk.CreateMessageParams{MaxTokens: 5, Messages: []*gosdk.SamplingMessage{{Role: "user", Content: &gosdk.TextContent{Text: "hi"}}}})
			said = append(said, fmt.Sprintf("sample: %v (%s)", err, time.Since(t0).Round(time.Millisecond)))
			t0 = time.Now()
			err = req.Session.Ping(ctx, nil)
			said = append(said, fmt.Sprintf("ping: %v (%s)", err, time.Since(t0).Round(time.Millisecond)))
			err = req.Session.Log(ctx, &gosdk.LoggingMessageParams{Level: "info", Data: "a log line"})
			said = append(said, fmt.Sprintf("log: %v", err))
			return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: strings.Join(said, "\n")}}}, nil, nil
		})
	gosdk.AddTool(s, &gosdk.Tool{Name: "pid", Description: "Answers the server's process id."},
		func(context.Context, *gosdk.CallToolRequest, sdkNoIn) (*gosdk.CallToolResult, any, error) {
			return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: fmt.Sprint(os.Getpid())}}}, nil, nil
		})
	return s
}

// serveGoSDK is the test binary as a go-sdk MCP server (see goSDKServerEnv).
func serveGoSDK(mode string) {
	note := func(string) {}
	if path := os.Getenv("TOOLSERVERD_GOSDK_NOTES"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		note = func(s string) { fmt.Fprintln(f, s) }
	}
	// A server with a keep-alive pings its client so often and ends the session
	// when a ping goes unanswered.
	keepAlive, _ := time.ParseDuration(os.Getenv("TOOLSERVERD_GOSDK_KEEPALIVE"))
	s := newGoSDKServer(note, keepAlive)
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if mode == "stdio" {
		if err := s.Run(ctx, &gosdk.StdioTransport{}); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	getServer := func(*http.Request) *gosdk.Server { return s }
	var h http.Handler
	switch mode {
	case "http":
		h = gosdk.NewStreamableHTTPHandler(getServer, nil)
	case "http-stateless":
		h = gosdk.NewStreamableHTTPHandler(getServer, &gosdk.StreamableHTTPOptions{Stateless: true})
	case "http-json":
		h = gosdk.NewStreamableHTTPHandler(getServer, &gosdk.StreamableHTTPOptions{JSONResponse: true})
	case "sse":
		h = gosdk.NewSSEHandler(getServer, nil)
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", mode)
		os.Exit(2)
	}
	port := os.Getenv("TOOLSERVERD_GOSDK_PORT")
	if port == "" {
		port = "0"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "http://%s/mcp\n", ln.Addr())
	_ = out.Flush()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
