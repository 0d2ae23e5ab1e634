;;; gc.scm: Guile on the collector: weak hash tables, guardians, (gc),
;;; par-map on threads, and a module compiled by `guild compile'.
;;; What it prints on stdout must be the same on bdwgc and on lfgc;
;;; stderr gets the collector libraries mapped into this process.
(use-modules (ice-9 threads) (ice-9 rdelim) (srfi srfi-1) (lfgc-mod))

(define (say . xs) (for-each display xs) (newline))
;; LFGC_RT_SCALE (bench/modes/runtimes.sh) multiplies the work.
(define scale (string->number (or (getenv "LFGC_RT_SCALE") "1")))

;; Garbage that only a collection gets rid of, made out of the way of the
;; caller's stack so that conservative scanning does not see it.
(define (churn n)
  (let loop ((i 0) (acc 0))
    (if (= i n) acc
        (loop (+ i 1) (+ acc (length (iota 50)) (string-length (number->string i)))))))

;; 1. Weak hash tables: kept keys stay, dropped keys mostly go.
(define kept (map (lambda (i) (list 'kept i)) (iota 500)))
(define wk (make-weak-key-hash-table))
(define wv (make-weak-value-hash-table))
(define (fill!)
  (for-each (lambda (k) (hashq-set! wk k (cadr k)) (hash-set! wv (cadr k) k)) kept)
  (do ((i 0 (+ i 1))) ((= i (* scale 20000)))
    (let ((k (list 'dropped i)))
      (hashq-set! wk k i)
      (hash-set! wv (+ 100000 i) (list 'value i)))))
(fill!)
(churn (* scale 20000))
(gc) (gc)
(define (count-table t) (hash-fold (lambda (k v n) (+ n 1)) 0 t))
(say "weak-key table keeps every live key: "
     (every (lambda (k) (eqv? (hashq-ref wk k) (cadr k))) kept))
(say "weak-value table keeps every live value: "
     (every (lambda (k) (eq? (hash-ref wv (cadr k)) k)) kept))
(say "weak-key table lost most dropped keys: " (< (count-table wk) (* scale 5000)))
(say "weak-value table lost most dropped values: " (< (count-table wv) (* scale 5000)))

;; 2. Guardians: dropped objects come back, live ones do not.
(define g (make-guardian))
(define live-guarded (map (lambda (i) (make-vector 8 i)) (iota 100)))
(for-each g live-guarded)
(define (guard-garbage!)
  (do ((i 0 (+ i 1))) ((= i (* scale 2000)))
    (g (make-vector 8 (+ 1000 i)))))
(guard-garbage!)
(churn (* scale 20000))
(gc) (gc)
(define returned
  (let loop ((acc '()))
    (let ((o (g))) (if o (loop (cons o acc)) acc))))
(say "guardian returned only dropped objects: "
     (every (lambda (v) (>= (vector-ref v 0) 1000)) returned))
(say "guardian returned most dropped objects: " (> (length returned) (* scale 1500)))
(say "returned objects intact: "
     (every (lambda (v) (every (lambda (x) (eqv? x (vector-ref v 0))) (vector->list v)))
            returned))

;; 3. (gc) many times while allocating; live data stays intact.
(define tree
  (let build ((d 14)) (if (= d 0) 1 (cons (build (- d 1)) (build (- d 1))))))
(define (tree-sum t) (if (pair? t) (+ (tree-sum (car t)) (tree-sum (cdr t))) t))
(do ((i 0 (+ i 1))) ((= i 10)) (churn 5000) (gc))
(say "tree sum after 10 collections: " (tree-sum tree))

;; 4. par-map and futures on threads, each allocating.
(define (work n)
  (let loop ((i 0) (l '()))
    (if (= i 2000)
        (fold + 0 (map (lambda (x) (string-length x)) l))
        (loop (+ i 1) (cons (string-append (number->string n) "-" (number->string i)) l)))))
(say "par-map: " (apply + (par-map work (iota (* scale 64)))))
(say "n-par-map: " (apply + (n-par-map 4 work (iota (* scale 64)))))
(define threads
  (map (lambda (k) (call-with-new-thread (lambda () (tree-sum (work k) ) (work k))))
       (iota 4)))
(say "threads: " (map join-thread threads))

;; 5. The module compiled by guild compile.
(say "compiled module: " (lfgc-mod-checksum 3000))

(say "kept list intact: " (equal? kept (map (lambda (i) (list 'kept i)) (iota 500))))

(call-with-input-file "/proc/self/maps"
  (lambda (port)
    (let loop ()
      (let ((line (read-line port)))
        (unless (eof-object? line)
          (when (or (string-contains line "libgc.so") (string-contains line "liblfgc.so"))
            (format (current-error-port) "maps: ~a~%" line))
          (loop))))))
