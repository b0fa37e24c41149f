// Command go-modzip writes one version of a Go module into a GOPROXY
// directory (the file layout `GOPROXY=file://DIR` reads): @v/list,
// VERSION.info, VERSION.mod and VERSION.zip under the escaped module path.
// `make dist-go` runs it; the zip is made by golang.org/x/mod/zip, the code
// the go command uses, from the files named on stdin (relative to -dir, one a
// line: what git would commit), so local build outputs stay out.
//
//	git ls-files ... | go-modzip -dir go -module M -version v0.1.0 -time T -out dist/go
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// file is one file of the module for zip.Create.
type file struct{ dir, rel string }

func (f file) Path() string                 { return f.rel }
func (f file) Lstat() (fs.FileInfo, error)  { return os.Lstat(filepath.Join(f.dir, f.rel)) }
func (f file) Open() (io.ReadCloser, error) { return os.Open(filepath.Join(f.dir, f.rel)) }

func main() {
	dir := flag.String("dir", "", "the module's directory (holds go.mod)")
	path := flag.String("module", "", "the module path")
	version := flag.String("version", "", "the version, e.g. v0.1.0")
	stamp := flag.Int64("time", 0, "the version's time (Unix seconds) for .info")
	out := flag.String("out", "", "the GOPROXY directory to write into")
	flag.Parse()
	if *dir == "" || *path == "" || *version == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	log.SetFlags(0)
	log.SetPrefix("go-modzip: ")
	m := module.Version{Path: *path, Version: *version}
	if err := module.Check(m.Path, m.Version); err != nil {
		log.Fatal(err)
	}
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		log.Fatal(err)
	}
	vdir := filepath.Join(*out, escaped, "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		log.Fatal(err)
	}

	var files []zip.File
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if rel := sc.Text(); rel != "" {
			files = append(files, file{*dir, filepath.ToSlash(rel)})
		}
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	// A fixed order (and zip.Create's zero file times): the same files give
	// the same bytes, so dist/SHA256SUMS survives a rebuild.
	sort.Slice(files, func(i, j int) bool { return files[i].Path() < files[j].Path() })

	zf, err := os.Create(filepath.Join(vdir, m.Version+".zip"))
	if err != nil {
		log.Fatal(err)
	}
	if err := zip.Create(zf, m, files); err != nil {
		log.Fatal(err)
	}
	if err := zf.Close(); err != nil {
		log.Fatal(err)
	}
	// Fails on what the go command would refuse to extract.
	if _, err := zip.CheckZip(m, zf.Name()); err != nil {
		log.Fatal(err)
	}

	mod, err := os.ReadFile(filepath.Join(*dir, "go.mod"))
	if err != nil {
		log.Fatal(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, time.Unix(*stamp, 0).UTC()})
	if err != nil {
		log.Fatal(err)
	}
	for name, data := range map[string][]byte{
		m.Version + ".mod":  mod,
		m.Version + ".info": append(info, '\n'),
		"list":              []byte(m.Version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("go-modzip: %s@%s: %d files into %s\n", m.Path, m.Version, len(files), vdir)
}
