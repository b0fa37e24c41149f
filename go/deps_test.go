package slidelimit_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPlainImportPullsInNoPrometheus: what `import "github.com/slidelimit/slidelimit/go"`
// compiles (go list -deps, tests excluded) holds no Prometheus package, and
// promlimit's does, which shows the check would see one.
func TestPlainImportPullsInNoPrometheus(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	deps := func(pkg string) []string {
		out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				t.Fatalf("go list -deps %s: %v\n%s", pkg, err, exit.Stderr)
			}
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	prometheus := func(pkgs []string) []string {
		var found []string
		for _, p := range pkgs {
			if strings.Contains(p, "prometheus") {
				found = append(found, p)
			}
		}
		return found
	}

	plain := deps("github.com/slidelimit/slidelimit/go")
	if found := prometheus(plain); len(found) > 0 {
		t.Errorf("importing slidelimit compiles %d Prometheus packages: %v", len(found), found)
	}
	// The list is the real one: it holds go-redis, which the package does use.
	if !slices.Contains(plain, "github.com/redis/go-redis/v9") {
		t.Errorf("go list -deps names no go-redis, so it is not the package's graph: %v", plain)
	}
	if found := prometheus(deps("github.com/slidelimit/slidelimit/go/promlimit")); !slices.Contains(found,
		"github.com/prometheus/client_golang/prometheus") {
		t.Errorf("promlimit's dependencies should hold the Prometheus client: %v", found)
	}
	// River's integration needs no Prometheus either.
	if found := prometheus(deps("github.com/slidelimit/slidelimit/go/riverlimit")); len(found) > 0 {
		t.Errorf("importing riverlimit compiles Prometheus packages: %v", found)
	}
}
