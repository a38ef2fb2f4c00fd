// kstatus-judge reads Kubernetes objects (a YAML stream or JSON documents) on stdin and prints,
// for each one, one JSON line with what sigs.k8s.io/cli-utils pkg/kstatus/status.Compute says:
//
//	{"kind":"Process","namespace":"ns","name":"web","status":"InProgress","message":"..."}
//
// A document that is a List is judged item by item. Exit 1 on a decode or compute error.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Message   string `json:"message"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kstatus-judge: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(os.Stdin), 4096)
	out := json.NewEncoder(os.Stdout)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			fail("decode: %v", err)
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		// The unstructured JSON scheme keeps integers int64, as the API machinery does.
		decoded, err := runtime.Decode(unstructured.UnstructuredJSONScheme, raw)
		if err != nil {
			fail("decode: %v", err)
		}
		var items []*unstructured.Unstructured
		switch obj := decoded.(type) {
		case *unstructured.Unstructured:
			items = append(items, obj)
		case *unstructured.UnstructuredList:
			for i := range obj.Items {
				items = append(items, &obj.Items[i])
			}
		default:
			fail("decode: unexpected %T", decoded)
		}
		for _, u := range items {
			res, err := status.Compute(u)
			if err != nil {
				fail("%s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
			if err := out.Encode(verdict{u.GetKind(), u.GetNamespace(), u.GetName(), res.Status.String(), res.Message}); err != nil {
				fail("write: %v", err)
			}
		}
	}
}
