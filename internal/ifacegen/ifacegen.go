// Package ifacegen is what the generators of interface wrappers share (internal/placement's
// observegen, internal/dualwrite's wrapgen): loading the module's interfaces with each
// method's doc comment, rendering a method's parameters and results, and writing the
// generated file with its imports.
package ifacegen

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Module is the module path the interfaces are named under.
const Module = "github.com/shardmart/shardmart/"

// Interface is one loaded interface.
type Interface struct {
	Name    string     // as asked for: "internal/cart.Repository"
	Type    types.Type // the named type
	Methods []Method   // in the order go/types sorts them (by name)
}

// Method is one method of an interface with its doc comment.
type Method struct {
	Name string
	Sig  *types.Signature
	Doc  *ast.CommentGroup // nil without one
}

// Directive returns the argument of the method's `//<tool>:` directive comment ("write" for
// `//dualwrite:write`), and whether it has one.
func (m Method) Directive(tool string) (string, bool) {
	if m.Doc == nil {
		return "", false
	}
	for _, c := range m.Doc.List {
		if arg, ok := strings.CutPrefix(c.Text, "//"+tool+":"); ok {
			return strings.TrimSpace(arg), true
		}
	}
	return "", false
}

// Load loads the interface each item names ("<package path in the module>.<type name>",
// by name), in items' order, each with its methods' doc comments (a method an interface
// embeds from a package not named has none).
func Load[T any](items []T, name func(T) string) ([]Interface, error) {
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = name(it)
	}
	var patterns []string
	for _, n := range names {
		pkg, _, _ := strings.Cut(n, ".")
		if !slices.Contains(patterns, Module+pkg) {
			patterns = append(patterns, Module+pkg)
		}
	}
	sort.Strings(patterns)
	cfg := &packages.Config{Mode: packages.NeedTypes | packages.NeedName | packages.NeedImports | packages.NeedSyntax}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("load %s: %v", p.PkgPath, p.Errors[0])
		}
		byPath[p.PkgPath] = p
	}
	var out []Interface
	for _, n := range names {
		path, name, _ := strings.Cut(n, ".")
		pkg := byPath[Module+path]
		if pkg == nil {
			return nil, fmt.Errorf("%s: package not loaded", n)
		}
		in, err := Lookup(pkg.Types, pkg.Syntax, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		in.Name = n
		out = append(out, in)
	}
	return out, nil
}

// Lookup finds interface name in pkg, type-checked from files, with its methods' doc comments.
func Lookup(pkg *types.Package, files []*ast.File, name string) (Interface, error) {
	obj := pkg.Scope().Lookup(name)
	if obj == nil {
		return Interface{}, fmt.Errorf("%s not found", name)
	}
	iface, ok := obj.Type().Underlying().(*types.Interface)
	if !ok {
		return Interface{}, fmt.Errorf("%s is not an interface", name)
	}
	docs := map[token.Pos]*ast.CommentGroup{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if it, ok := n.(*ast.InterfaceType); ok {
				for _, fld := range it.Methods.List {
					for _, name := range fld.Names {
						docs[name.Pos()] = fld.Doc
					}
				}
			}
			return true
		})
	}
	in := Interface{Name: pkg.Path() + "." + name, Type: obj.Type()}
	for i := range iface.NumMethods() {
		m := iface.Method(i)
		in.Methods = append(in.Methods, Method{Name: m.Name(), Sig: m.Type().(*types.Signature), Doc: docs[m.Pos()]})
	}
	return in, nil
}

// File is a generated Go file being written: its body and the imports the body uses.
type File struct {
	Body    bytes.Buffer
	imports map[string]bool
}

// NewFile starts a file importing imports (more are added as types are rendered).
func NewFile(imports ...string) *File {
	f := &File{imports: map[string]bool{}}
	for _, p := range imports {
		f.imports[p] = true
	}
	return f
}

// Printf appends to the body.
func (f *File) Printf(format string, args ...any) { fmt.Fprintf(&f.Body, format, args...) }

func (f *File) qualifier(p *types.Package) string {
	f.imports[p.Path()] = true
	return p.Name()
}

// Type renders t as the file refers to it (package-qualified, the package imported).
func (f *File) Type(t types.Type) string { return types.TypeString(t, f.qualifier) }

// Params renders a signature's parameters with their declared names and the arguments that
// pass them on. A parameter without a usable name, or with one the generated code uses
// (reserved, or beginning with "out", the results' prefix), is named p<i>.
func (f *File) Params(sig *types.Signature, reserved ...string) (params, args []string) {
	ps := sig.Params()
	for i := range ps.Len() {
		v := ps.At(i)
		name := v.Name()
		if name == "" || name == "_" || slices.Contains(reserved, name) || strings.HasPrefix(name, "out") {
			name = fmt.Sprintf("p%d", i)
		}
		t := f.Type(v.Type())
		arg := name
		if sig.Variadic() && i == ps.Len()-1 {
			t = "..." + strings.TrimPrefix(t, "[]")
			arg += "..."
		}
		params = append(params, name+" "+t)
		args = append(args, arg)
	}
	return params, args
}

// Results renders a signature's result types.
func (f *File) Results(sig *types.Signature) []string {
	var out []string
	for i := range sig.Results().Len() {
		out = append(out, f.Type(sig.Results().At(i).Type()))
	}
	return out
}

// ResultList renders result types as a signature lists them.
func ResultList(rs []string) string {
	switch len(rs) {
	case 0:
		return ""
	case 1:
		return rs[0]
	}
	return "(" + strings.Join(rs, ", ") + ")"
}

// TakesContextReturnsError reports whether a method's first parameter is a context.Context
// and its last result an error.
func TakesContextReturnsError(sig *types.Signature) bool {
	res := sig.Results()
	return sig.Params().Len() > 0 && types.TypeString(sig.Params().At(0).Type(), nil) == "context.Context" &&
		res.Len() > 0 && types.TypeString(res.At(res.Len()-1).Type(), nil) == "error"
}

// Source returns the formatted file: a "Code generated by <tool>; DO NOT EDIT." header,
// package pkg, the imports (the standard library's first) and the body.
func (f *File) Source(tool, pkg string) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by %s; DO NOT EDIT.\n\npackage %s\n\nimport (\n", tool, pkg)
	paths := make([]string, 0, len(f.imports))
	for p := range f.imports {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if !strings.Contains(p, ".") {
			fmt.Fprintf(&b, "\t%q\n", p)
		}
	}
	b.WriteString("\n")
	for _, p := range paths {
		if strings.Contains(p, ".") {
			fmt.Fprintf(&b, "\t%q\n", p)
		}
	}
	b.WriteString(")\n\n")
	b.Write(f.Body.Bytes())
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format the generated source: %w\n%s", err, b.Bytes())
	}
	return src, nil
}

// Main is a generator's main: it writes what generate returns to the file named by -o
// (defaultOut, relative to the module root; "-" for standard output), or exits with the
// error, prefixed by tool.
func Main(tool, defaultOut string, generate func() ([]byte, error)) {
	out := flag.String("o", defaultOut, "file to write (- for standard output)")
	flag.Parse()
	src, err := generate()
	if err == nil && *out == "-" {
		_, err = os.Stdout.Write(src)
	} else if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, tool+":", err)
		os.Exit(1)
	}
}

// CheckCurrent runs the generator in the package directory gen (`go run gen -o -`) and
// fails when file does not hold what it writes: a generated file's test calls it.
func CheckCurrent(gen, file string) error {
	want, err := exec.Command("go", "run", gen, "-o", "-").Output()
	if err != nil {
		return fmt.Errorf("run %s: %w", gen, err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s is not what %s writes now", file, gen)
	}
	return nil
}
