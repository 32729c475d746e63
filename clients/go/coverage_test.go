package delayq_test

// OpenAPI coverage: every operation of a running server's /openapi.json must be in Routes
// (covered) or in LeftOut (with a reason), and neither may name one the server does not
// have, so a route added to the server without this client fails here. Each Routes entry
// must name a function or method of this package whose body holds that route, read from
// the source with go/parser: an entry cannot claim a function that does not call it.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"testing"

	delayq "github.com/delayq/delayq/clients/go"
)

func TestOpenAPICoverage(t *testing.T) {
	doc, err := client(t).OpenAPI(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	paths, _ := doc["paths"].(map[string]any)
	server := map[string]bool{}
	for path, item := range paths {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				server[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	if len(server) < 20 || !server["POST /v1/queues/{queue}/messages"] {
		t.Fatalf("the server documents only %d operations", len(server))
	}
	var missing, stale []string
	for op := range server {
		if _, ok := delayq.Routes[op]; !ok {
			if _, ok := delayq.LeftOut[op]; !ok {
				missing = append(missing, op)
			}
		}
	}
	for op := range delayq.Routes {
		if !server[op] {
			stale = append(stale, op)
		}
		if _, both := delayq.LeftOut[op]; both {
			t.Errorf("%s is both covered and left out", op)
		}
	}
	for op, reason := range delayq.LeftOut {
		if !server[op] {
			stale = append(stale, op)
		}
		if len(reason) < 20 {
			t.Errorf("%s: give a reason", op)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("operations neither in Routes nor in LeftOut (routes.go):\n%s", strings.Join(missing, "\n"))
	}
	if len(stale) > 0 {
		t.Errorf("entries for operations the server does not have:\n%s", strings.Join(stale, "\n"))
	}
}

func TestRoutesNameTheirFunctions(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Function name ("Send", "Client.Get") -> the string literals in its body.
	literals := map[string]map[string]bool{}
	for _, f := range pkgs["delayq"].Files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil {
				name = receiverName(fn.Recv.List[0].Type) + "." + name
			}
			found := map[string]bool{}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						found[s] = true
					}
				}
				return true
			})
			literals[name] = found
		}
	}
	for op, name := range delayq.Routes {
		body, ok := literals[name]
		if !ok {
			t.Errorf("%s -> %s: no such function or method", op, name)
		} else if !body[op] {
			t.Errorf("%s -> %s: its body does not make that request", op, name)
		}
	}
}

func receiverName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverName(x.X)
	case *ast.IndexExpr:
		return receiverName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}
