// Command housefigures prints the figures the house issues compare before
// and after a redesign, read from the Go source of a module (tests and
// other modules left out): lines of non-test Go per package and in all,
// exported identifiers per package (top-level names and methods of
// exported types), the longest functions and the largest files.
//
// Usage: go run ./scripts/housefigures [-n 12] [DIR]   (DIR: the module root, default .)
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type pkg struct {
	dir      string
	lines    int
	exported int
}

type item struct {
	name  string
	lines int
}

func main() {
	n := flag.Int("n", 12, "how many of the longest functions and largest files")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	pkgs := map[string]*pkg{}
	var funcs, files []item
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		dir := filepath.Dir(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		lines := countLines(path)
		p := pkgs[dir]
		if p == nil {
			p = &pkg{dir: dir}
			pkgs[dir] = p
		}
		p.lines += lines
		files = append(files, item{rel, lines})
		if !strings.HasPrefix(dir, "internal") && !strings.Contains(dir, "/internal") && f.Name.Name != "main" {
			p.exported += exported(f)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				name = recvName(fd.Recv.List[0].Type) + "." + name
			}
			l := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			funcs = append(funcs, item{rel + ":" + name, l})
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "housefigures:", err)
		os.Exit(1)
	}
	var all []*pkg
	total, long := 0, 0
	for _, p := range pkgs {
		all = append(all, p)
		total += p.lines
	}
	for _, f := range funcs {
		if f.lines >= 75 {
			long++
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].dir < all[j].dir })
	fmt.Printf("non-test Go: %d lines in %d packages; functions of 75+ lines: %d\n\n", total, len(all), long)
	fmt.Println("package\tlines\texported")
	for _, p := range all {
		fmt.Printf("%s\t%d\t%d\n", p.dir, p.lines, p.exported)
	}
	top := func(title string, xs []item) {
		sort.Slice(xs, func(i, j int) bool {
			return xs[i].lines > xs[j].lines || xs[i].lines == xs[j].lines && xs[i].name < xs[j].name
		})
		fmt.Printf("\n%s\n", title)
		for i := 0; i < *n && i < len(xs); i++ {
			fmt.Printf("%d\t%s\n", xs[i].lines, xs[i].name)
		}
	}
	top("longest functions", funcs)
	top("largest files", files)
}

func countLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for s.Scan() {
		n++
	}
	return n
}

// exported counts a file's exported top-level names and the exported
// methods of its exported receiver types.
func exported(f *ast.File) int {
	n := 0
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil || ast.IsExported(recvName(d.Recv.List[0].Type)) {
				n++
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						n++
					}
				case *ast.ValueSpec:
					for _, id := range s.Names {
						if id.IsExported() {
							n++
						}
					}
				}
			}
		}
	}
	return n
}

func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return "?"
		}
	}
}
