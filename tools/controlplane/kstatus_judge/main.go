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

func judge(out *json.Encoder, u *unstructured.Unstructured) error {
	res, err := status.Compute(u)
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return out.Encode(verdict{u.GetKind(), u.GetNamespace(), u.GetName(), res.Status.String(), res.Message})
}

func main() {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(os.Stdin), 4096)
	out := json.NewEncoder(os.Stdout)
	for {
		var obj map[string]interface{}
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			fmt.Fprintln(os.Stderr, "kstatus-judge: decode:", err)
			os.Exit(1)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		var items []*unstructured.Unstructured
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				fmt.Fprintln(os.Stderr, "kstatus-judge: list:", err)
				os.Exit(1)
			}
			for i := range list.Items {
				items = append(items, &list.Items[i])
			}
		} else {
			items = append(items, u)
		}
		for _, item := range items {
			if err := judge(out, item); err != nil {
				fmt.Fprintln(os.Stderr, "kstatus-judge:", err)
				os.Exit(1)
			}
		}
	}
}
