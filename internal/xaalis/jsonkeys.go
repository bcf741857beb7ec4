package xaalis

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// DuplicateKeyError is the invalid_request answer to a body holding a
// key twice; context.key names it.
func DuplicateKeyError(path string) *Error {
	e := Errorf(EInvalidRequest, "The body has the key %q more than once; send each key once.", path)
	e.Context = map[string]any{"key": path}
	return e
}

// DuplicateKey returns the path ("payer.phone", "items[1].amount") of the
// first key that one object of a JSON body holds twice, or "" when none
// does (or the body is not JSON: the decoder says why).
//
// encoding/json keeps the last of two equal keys, and matches a struct's
// fields without regard to case, so {"amount":1,"Amount":2} sets Amount
// twice as well. target is what the body is decoded into: in an object
// decoded into a struct, keys are compared as encoding/json matches them
// (case folded); in maps (metadata) and anything untyped, exactly.
func DuplicateKey(body []byte, target any) string {
	if distinctKeys(body) {
		return ""
	}
	return duplicateKey(body, target)
}

// maxFastKeys bounds the keys distinctKeys compares, each with each.
const maxFastKeys = 48

// distinctKeys reports, in one pass over the bytes and without
// allocating, that no two strings in a key's place (after '{' or ',' in
// an object) are equal even without regard to case: then no object of
// the body holds a key twice, however it decodes. It says false when it
// cannot tell cheaply (a key with an escape or a byte past ASCII, where
// case folding is Unicode's; more than maxFastKeys keys; an unterminated
// string), and duplicateKey decides. A body that is not JSON is no
// concern of its: the strings in a key's place are every key the
// decoder can meet before its error.
func distinctKeys(body []byte) bool {
	var keys [maxFastKeys][]byte
	n := 0
	var stack [64]byte // the open containers' '{' or '['
	depth := 0
	prev := byte(0) // the last byte outside strings that is not space
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case ' ', '\t', '\n', '\r':
		case '"':
			key := depth > 0 && stack[depth-1] == '{' && (prev == '{' || prev == ',')
			start, plain := i+1, true
			for i++; ; i++ {
				if i >= len(body) {
					return false
				}
				b := body[i]
				if b == '"' {
					break
				}
				if b == '\\' {
					plain = false
					i++
				} else if b >= 0x80 {
					plain = false
				}
			}
			if key {
				if !plain || n == len(keys) {
					return false
				}
				k := body[start:i]
				for _, o := range keys[:n] {
					if asciiEqualFold(o, k) {
						return false
					}
				}
				keys[n] = k
				n++
			}
			prev = '"'
		case '{', '[':
			if depth == len(stack) {
				return false
			}
			stack[depth] = c
			depth++
			prev = c
		case '}', ']':
			if depth > 0 {
				depth--
			}
			prev = c
		default:
			prev = c
		}
	}
	return true
}

// asciiEqualFold reports whether two ASCII strings are equal without
// regard to case.
func asciiEqualFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// duplicateKey is DuplicateKey by the decoder's tokens.
func duplicateKey(body []byte, target any) string {
	type frame struct {
		object    bool
		typ       reflect.Type // what this object or array decodes into; nil: untyped
		seen      map[string]bool
		path      string
		expectKey bool
		key       string
		index     int
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	root := reflect.TypeOf(target)
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return ""
			}
			continue
		}
		if top != nil && top.object && top.expectKey {
			key, _ := tok.(string)
			norm := key
			if structType(top.typ) != nil {
				norm = foldKey(key)
			}
			if top.seen[norm] {
				return joinPath(top.path, key)
			}
			top.seen[norm] = true
			top.expectKey, top.key = false, key
			continue
		}
		// A value: of the root, of an object's key or an array's element.
		path, typ := "", root
		if top != nil {
			if top.object {
				path, typ = joinPath(top.path, top.key), childType(top.typ, top.key)
				top.expectKey = true
			} else {
				path, typ = top.path+"["+strconv.Itoa(top.index)+"]", elemType(top.typ)
				top.index++
			}
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{object: d == '{', typ: typ, seen: map[string]bool{}, path: path, expectKey: d == '{'})
		} else if top == nil {
			return "" // a scalar body
		}
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// deref follows pointers; a type that decodes itself is untyped here.
func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		if t.Implements(unmarshalerType) {
			return nil
		}
		t = t.Elem()
	}
	if t != nil && reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	return t
}

// structType is t when it decodes as a struct, else nil.
func structType(t reflect.Type) reflect.Type {
	if t = deref(t); t != nil && t.Kind() == reflect.Struct {
		return t
	}
	return nil
}

// childType is the type a key of an object of type t decodes into.
func childType(t reflect.Type, key string) reflect.Type {
	t = deref(t)
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Map:
		return t.Elem()
	case reflect.Struct:
		f := fieldsOf(t)
		if ft, ok := f.exact[key]; ok {
			return ft
		}
		return f.folded[foldKey(key)]
	}
	return nil
}

// jsonFields are a struct's fields as encoding/json names them.
type jsonFields struct {
	exact, folded map[string]reflect.Type
}

var fieldCache sync.Map // reflect.Type -> *jsonFields

// fieldsOf returns the JSON fields of a struct type, computed once.
func fieldsOf(t reflect.Type) *jsonFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*jsonFields)
	}
	f := &jsonFields{exact: map[string]reflect.Type{}, folded: map[string]reflect.Type{}}
	for _, sf := range reflect.VisibleFields(t) {
		if !sf.IsExported() || (sf.Anonymous && sf.Tag.Get("json") == "") {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := f.exact[name]; !dup {
			f.exact[name] = sf.Type
		}
		if _, dup := f.folded[foldKey(name)]; !dup {
			f.folded[foldKey(name)] = sf.Type
		}
	}
	fieldCache.Store(t, f)
	return f
}

// foldKey is a key as encoding/json compares it with a field's name.
func foldKey(k string) string { return strings.ToLower(strings.ToUpper(k)) }

// elemType is the type of an element of an array of type t.
func elemType(t reflect.Type) reflect.Type {
	if t = deref(t); t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		return t.Elem()
	}
	return nil
}
