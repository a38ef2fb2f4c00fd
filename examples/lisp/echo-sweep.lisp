;; A test matrix: one Aplicacao install fanned out over two chart versions and two replica counts,
;; four ephemeral Processes in all (axis 0, the version, changes fastest). Each must answer a CEL
;; postcondition before it is attested, and they run one at a time (:max-concurrent 1). The chart is
;; the matrix's own: every ephemeral Process of a chart holds a slot of its maxConcurrent group, so on a
;; chart that long-lived Processes also install (the pool's bound member in examples/pool.yaml) the
;; environments would wait for them. `tatara up` applies it compiled; by hand:
;;
;;   tatara compile examples/lisp/echo-sweep.lisp --dry-run
;;   tatara compile examples/lisp/echo-sweep.lisp -n tatara-examples | kubectl apply -f -
(defenvmatrix echo-sweep
  :base (:aplicacao (:chart-ref "oci://ghcr.io/pleme-io/charts/echo-server"
                     :version "0.5.5"
                     :values-overlay (:service (:port 8080)))
         :ttl "1h"
         :postconditions ((:kind Cel
                           :params (:expression "children.all(c, c.ready == true)"))))
  :axes ((:name "version" :path "@version" :values ("0.5.4" "0.5.5"))
         (:name "replicas" :path "replicaCount" :values (1 3)))
  :budget (:max-concurrent 1))
