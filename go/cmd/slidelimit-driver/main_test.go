package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slidelimit/slidelimit/go"
)

// session reads the example session of docs/driver.md: request and reply
// lines in order.
func session(t *testing.T) (requests, replies []string) {
	t.Helper()
	text, err := os.ReadFile("../../../docs/driver.md")
	if err != nil {
		t.Fatal(err)
	}
	_, example, ok := strings.Cut(string(text), "## Example session")
	if !ok {
		t.Fatal("docs/driver.md has no example session")
	}
	for _, line := range strings.Split(example, "\n") {
		switch {
		case strings.HasPrefix(line, "> "):
			requests = append(requests, line[2:])
		case strings.HasPrefix(line, "< "):
			replies = append(replies, line[2:])
		}
	}
	if len(requests) < 5 || len(requests) != len(replies) {
		t.Fatalf("docs/driver.md's example session: %d requests, %d replies", len(requests), len(replies))
	}
	return requests, replies
}

// TestDocumentedSession replays the example session on the memory store (its
// decisions are the same as on Redis): every decision line is byte-identical
// to the documented one; an error has the documented code and field (the
// message is core's, whose wording may change). hello names this binding.
func TestDocumentedSession(t *testing.T) {
	requests, replies := session(t)
	d := &driver{}
	defer d.close()
	for i, request := range requests {
		var op struct {
			Op string `json:"op"`
		}
		if err := json.Unmarshal([]byte(request), &op); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if op.Op == "store" {
			request = `{"op":"store","kind":"memory"}`
		}
		got, exit := d.handle([]byte(request))
		want := replies[i]
		if exit != (op.Op == "exit") {
			t.Errorf("%s: exit %v", request, exit)
		}
		var gotFields, wantFields map[string]any
		if err := json.Unmarshal([]byte(got), &gotFields); err != nil {
			t.Fatalf("%s: reply %q is not JSON: %v", request, got, err)
		}
		if err := json.Unmarshal([]byte(want), &wantFields); err != nil {
			t.Fatalf("documented reply %q: %v", want, err)
		}
		switch {
		case op.Op == "hello":
			if gotFields["binding"] != "go" || gotFields["version"] != slidelimit.Version() || gotFields["ok"] != true {
				t.Errorf("hello: %s", got)
			}
		case wantFields["error"] != nil:
			if gotFields["error"] != wantFields["error"] || gotFields["field"] != wantFields["field"] {
				t.Errorf("%s:\n got %s\nwant %s (code and field)", request, got, want)
			}
		case got != want:
			t.Errorf("%s:\n got %s\nwant %s", request, got, want)
		}
	}
}

// TestLauncherNamesTheMakeTarget runs drivers/go with no program where it
// looks: exit 2, and stderr says what to build.
func TestLauncherNamesTheMakeTarget(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "drivers"), 0o755); err != nil {
		t.Fatal(err)
	}
	launcher, err := os.ReadFile("../../../drivers/go")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "drivers", "go")
	if err := os.WriteFile(path, launcher, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path).CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 || !strings.Contains(string(out), "make driver-go") {
		t.Fatalf("drivers/go without its program: %v, %q", err, out)
	}
}

// TestProtocolErrors: what the driver cannot read is a protocol error, and
// the driver carries on.
func TestProtocolErrors(t *testing.T) {
	d := &driver{}
	defer d.close()
	for _, request := range []string{
		`not json`, `[1]`, `{"op":1}`, `{"op":"fly"}`, `{"op":"hello","x":1}`,
		`{"op":"acquire","tenant":"t"}`,                          // no policy yet
		`{"op":"policy","resource":"r","limit":1,"window_ms":1}`, // no store yet
		`{"op":"store","kind":"disk"}`,
		`{"op":"store","kind":"memory","timeout_ms":-1}`,
		`{"op":"store","kind":"memory","timeout_ms":1.5}`,
		`{"op":"store","kind":"cluster","urls":"redis://127.0.0.1:1"}`,
	} {
		got, _ := d.handle([]byte(request))
		if !strings.HasPrefix(got, `{"error":"protocol","message":`) {
			t.Errorf("%s: %s", request, got)
		}
	}
	if got, _ := d.handle([]byte(`{"op":"store","kind":"memory"}`)); got != `{"ok":true}` {
		t.Fatalf("store after protocol errors: %s", got)
	}
	// A refused policy's error is every later op's answer, until one is accepted.
	refused := `{"error":"invalid_argument","field":"limit","message":"limit: must be at least 1"}`
	for _, request := range []string{`{"op":"policy","resource":"r","limit":0,"window_ms":1000}`,
		`{"op":"acquire","tenant":"t"}`, `{"op":"key","tenant":"t"}`} {
		if got, _ := d.handle([]byte(request)); got != refused {
			t.Errorf("%s:\n got %s\nwant %s", request, got, refused)
		}
	}
	if got, _ := d.handle([]byte(`{"op":"policy","resource":"r","limit":1,"window_ms":1000}`)); got != `{"ok":true}` {
		t.Fatalf("policy: %s", got)
	}
	if got, _ := d.handle([]byte(`{"op":"acquire","tenant":"t","cost":-1}`)); !strings.HasPrefix(got, `{"error":"protocol"`) {
		t.Errorf("a negative cost for the uint64 parameter: %s", got)
	}
}
