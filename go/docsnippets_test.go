package slidelimit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every ```go block of the Go docs must appear, line for line (indentation
// and blank lines aside), in the body of an Example function, which go test
// compiles (and runs, when it has an Output comment): a snippet that no
// longer matches the API fails the build instead of the user.
func TestDocSnippetsAreExamples(t *testing.T) {
	docs := []string{"../docs/go.md", "../README.md"}
	exampleFiles := []string{"example_test.go", "promlimit/example_test.go", "riverlimit/example_test.go"}

	var bodies [][]string
	fset := token.NewFileSet()
	for _, path := range exampleFiles {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Example") {
				continue
			}
			start, end := fset.Position(fn.Body.Pos()).Offset, fset.Position(fn.Body.End()).Offset
			bodies = append(bodies, snippetLines(string(src[start:end])))
		}
	}
	if len(bodies) == 0 {
		t.Fatal("no Example functions found")
	}

	block := regexp.MustCompile("(?ms)^```go\n(.*?)^```")
	checked := 0
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllStringSubmatch(string(text), -1) {
			checked++
			want := snippetLines(m[1])
			found := false
			for _, body := range bodies {
				if containsLines(body, want) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: this ```go block is in no Example function of %v "+
					"(copy it there, so go test compiles it):\n%s", doc, exampleFiles, m[1])
			}
		}
	}
	if checked == 0 {
		t.Fatal("no ```go blocks found in the docs")
	}
}

// snippetLines is text's lines without indentation, trailing space or blank lines.
func snippetLines(text string) []string {
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

func containsLines(body, want []string) bool {
	for i := 0; i+len(want) <= len(body); i++ {
		match := true
		for j := range want {
			if body[i+j] != want[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
