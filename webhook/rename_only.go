package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// RenameOnly answers a ConversionReview by changing each object's apiVersion and nothing else:
// the least a conversion webhook can do. The operator never serves it; it is the floor /convert
// is measured against (BenchmarkConvertHandler, and the bench's floor probes on a real apiserver).
func RenameOnly(w http.ResponseWriter, req *http.Request) {
	var review apix.ConversionReview
	if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	version, err := json.Marshal(review.Request.DesiredAPIVersion)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := &apix.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for i, raw := range review.Request.Objects {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			http.Error(w, fmt.Sprintf("request.objects[%d]: %v", i, err), http.StatusBadRequest)
			return
		}
		obj["apiVersion"] = version
		out, err := json.Marshal(obj)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	review.Request, review.Response = nil, resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}
