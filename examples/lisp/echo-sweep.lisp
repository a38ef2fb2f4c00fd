;; A test matrix: one Aplicacao install fanned out over two chart versions and two replica counts,
;; four ephemeral Processes in all (axis 0, the version, changes fastest). Each must answer a CEL
;; postcondition before it is attested. Compile it and apply the result:
;;
;;   tatara compile examples/lisp/echo-sweep.lisp --dry-run
;;   tatara compile examples/lisp/echo-sweep.lisp -n tatara-examples | kubectl apply -f -
(defenvmatrix echo-sweep
  :base (:aplicacao (:chart-ref "oci://ghcr.io/pleme-io/charts/lareira-demo-app"
                     :version "0.5.5"
                     :values-overlay (:service (:port 8080)))
         :ttl "1h"
         :postconditions ((:kind Cel
                           :params (:expression "children.all(c, c.ready == true)"))))
  :axes ((:name "version" :path "@version" :values ("0.5.4" "0.5.5"))
         (:name "replicas" :path "replicaCount" :values (1 3)))
  :budget (:max-concurrent 1))
