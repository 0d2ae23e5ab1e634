;;; lfgc-mod.scm: a module that tests/runtimes.sh compiles with
;;; `guild compile' (on bdwgc and on lfgc: the two .go files must match).
(define-module (lfgc-mod)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:export (lfgc-mod-checksum))

(define-record-type <point> (make-point x y) point? (x point-x) (y point-y))

(define (lfgc-mod-checksum n)
  (let* ((pts (map (lambda (i) (make-point i (* i i))) (iota n)))
         (v (list->vector pts))
         (h (make-hash-table)))
    (for-each (lambda (p) (hash-set! h (point-x p) p)) (vector->list v))
    (fold (lambda (i acc) (+ acc (point-y (hash-ref h i)))) 0 (iota n))))
