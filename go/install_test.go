package slidelimit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallFromACheckout follows the "from a checkout" steps of docs/go.md's
// Installing section in a fresh project outside the repository: a require
// and a replace directive pointing at this checkout, go mod tidy, go build,
// run. The project's go.mod and go.sum then name no Prometheus (nor River)
// module. Then go mod vendor, and the vendored build runs too: the header
// and the prebuilt archives live inside the module. (make test-install-go
// installs through a module proxy instead, with no replace.)
func TestInstallFromACheckout(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	checkout, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	// A fixed directory (rewritten each run), so go's build cache serves the
	// vendored packages of the second part from the previous run: they are
	// cached by directory.
	project := filepath.Join(checkout, "..", ".tmp", "go", "install-project")
	if err := os.RemoveAll(project); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod": "module example.com/app\n\ngo 1.26\n",
		"main.go": `package main

import (
	"context"
	"fmt"
	"time"

	"github.com/slidelimit/slidelimit/go"
)

func main() {
	limiter, err := slidelimit.NewMemory(slidelimit.Policy{Resource: "geocode", Limit: 1, Window: time.Second})
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	d, err := limiter.Acquire(context.Background(), "api-key-17")
	fmt.Println(d.Allowed, err)
}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(project, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// go mod tidy as a user runs it, through the environment's module proxy:
	// it also wants the modules that only the tests of dependencies import
	// (go-redis's ginkgo, for one), which no build here downloads. The build
	// and the vendoring after it run offline: every module they need is in
	// the module cache already (this package's own build put it there).
	online := append(os.Environ(), "GOWORK=off")
	offline := append(os.Environ(), "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
	goCmd := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(goTool, args...)
		cmd.Dir, cmd.Env = project, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, step := range []struct {
		env  []string
		args []string
	}{
		{offline, []string{"mod", "edit", "-require=github.com/slidelimit/slidelimit/go@v0.0.0",
			"-replace=github.com/slidelimit/slidelimit/go=" + checkout}},
		{online, []string{"mod", "tidy"}},
		{offline, []string{"build", "-o", "app", "."}},
	} {
		if out, err := goCmd(step.env, step.args...); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(step.args, " "), err, out)
		}
	}
	out, err := exec.Command(filepath.Join(project, "app")).CombinedOutput()
	if err != nil || string(out) != "true <nil>\n" {
		t.Fatalf("the program printed %q (%v), want \"true <nil>\"", out, err)
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		text, err := os.ReadFile(filepath.Join(project, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(text), "\n") {
			if strings.Contains(line, "prometheus") || strings.Contains(line, "riverqueue") {
				t.Errorf("the project's %s names a module it does not import: %s", name, line)
			}
		}
	}

	// Vendoring: vendor/ must carry the header and the prebuilt archives
	// (prebuilt.go makes go mod vendor copy them), and the vendored build
	// links and runs.
	if out, err := goCmd(offline, "mod", "vendor"); err != nil {
		t.Fatalf("go mod vendor: %v\n%s", err, out)
	}
	vendored := filepath.Join(project, "vendor", "github.com", "slidelimit", "slidelimit", "go")
	for _, f := range []string{"include/slidelimit.h", "lib/linux_amd64/libslidelimit_ffi.a", "lib/linux_arm64/libslidelimit_ffi.a"} {
		if _, err := os.Stat(filepath.Join(vendored, f)); err != nil {
			t.Errorf("go mod vendor left out %s: %v", f, err)
		}
	}
	if out, err := goCmd(offline, "build", "-mod=vendor", "-o", "app-vendored", "."); err != nil {
		t.Fatalf("go build -mod=vendor: %v\n%s", err, out)
	}
	out, err = exec.Command(filepath.Join(project, "app-vendored")).CombinedOutput()
	if err != nil || string(out) != "true <nil>\n" {
		t.Fatalf("the vendored program printed %q (%v), want \"true <nil>\"", out, err)
	}
}
