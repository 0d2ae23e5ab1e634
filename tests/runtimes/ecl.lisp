;;;; ecl.lisp: ECL on the collector: evaluation, compilation (bytecodes
;;;; and native code through the C compiler), threads and finalizers.
;;;; What it prints on stdout must be the same on bdwgc and on lfgc;
;;;; *error-output* gets the collector libraries mapped into this process.

(defun say (&rest xs) (format t "~{~a~}~%" xs) (finish-output))
;; LFGC_RT_SCALE (bench/modes/runtimes.sh) multiplies the work;
;; LFGC_RT_NO_CC=1 compiles to bytecodes only (no C compiler run to time).
(defparameter *scale* (parse-integer (or (ext:getenv "LFGC_RT_SCALE") "1")))
(when (ext:getenv "LFGC_RT_NO_CC") (ext:install-bytecodes-compiler))

;; Garbage made away from the caller's frame.
(defun churn (n)
  (let ((acc 0))
    (dotimes (i n acc)
      (incf acc (length (make-list 40 :initial-element i)))
      (incf acc (length (format nil "~r" (mod i 100)))))))

;; 1. Evaluation: the interpreter builds and drops structure.
(defparameter *kept* (loop for i below 2000 collect (list :kept i (format nil "s~d" i))))
(defparameter *table* (make-hash-table :test 'equal))
(dotimes (i (* 20000 *scale*))
  (setf (gethash (format nil "key~d" i) *table*) (make-array 10 :initial-element i))
  (when (>= i 500) (remhash (format nil "key~d" (- i 500)) *table*)))
(say "hash entries: " (hash-table-count *table*))
(say "eval: " (eval '(let ((s 0)) (dotimes (i 1000 s) (incf s (* i i))))))
(churn (* 20000 *scale*))
(ext:gc t)
(say "kept list intact: "
     (every (lambda (x i) (and (= (second x) i) (string= (third x) (format nil "s~d" i))))
            *kept* (loop for i below 2000 collect i)))

;; 2. Compilation: bytecodes, then native code with the C compiler.
(defun fib (n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))
(say "fib interpreted: " (fib 20))
(compile 'fib)
(say "fib compiled: " (fib 24) " " (compiled-function-p #'fib))
(defparameter *src* (merge-pathnames "lfgc-ecl-mod.lisp" (ext:getenv "LFGC_ECL_WORK")))
(with-open-file (s *src* :direction :output :if-exists :supersede)
  (format s "(defun mod-sum (n) (let ((v (make-array n))) ~
               (dotimes (i n) (setf (aref v i) (cons i (* i i)))) ~
               (loop for c across v sum (cdr c))))~%"))
(let ((fasl (compile-file *src* :verbose nil :print nil)))
  (load fasl :verbose nil))
(say "compiled file: " (mod-sum 5000) " " (compiled-function-p #'mod-sum))

;; 3. Threads allocate at the same time.
(defun work (k)
  (let ((l nil))
    (dotimes (i (* 3000 *scale*)) (push (format nil "~d-~d" k i) l))
    (churn 2000)
    (reduce #'+ l :key #'length)))
(let ((threads (loop for k below 4
                     collect (let ((k k)) (mp:process-run-function (format nil "w~d" k)
                                                                   (lambda () (work k)))))))
  (say "threads: " (mapcar (lambda (p) (mp:process-join p)) threads)))
(say "main: " (work 9))

;; 4. Finalizers: dropped objects are finalized, live ones are not.
(defparameter *finalized* 0)
(defparameter *live* (loop for i below 100 collect (make-array 4 :initial-element i)))
(dolist (o *live*)
  (ext:set-finalizer o (lambda (x) (declare (ignore x)) (error "live object finalized"))))
(defun make-garbage ()
  (dotimes (i (* 3000 *scale*))
    (ext:set-finalizer (make-array 4 :initial-element i)
                       ;; No lock: a finalizer may run inside an allocation of
                       ;; a thread that holds it.  A lost count only lowers it.
                       (lambda (x) (declare (ignore x)) (incf *finalized*)))))
(make-garbage)
(churn (* 20000 *scale*))
(dotimes (i 5) (ext:gc t) (churn 1000))
(say "most dropped objects finalized: " (> *finalized* (* 2000 *scale*)))
(say "live objects intact: "
     (every (lambda (o i) (every (lambda (x) (eql x i)) o)) *live* (loop for i below 100 collect i)))
(dolist (o *live*) (ext:set-finalizer o nil))

(with-open-file (s "/proc/self/maps")
  (loop for line = (read-line s nil) while line
        when (or (search "libgc.so" line) (search "liblfgc.so" line))
          do (format *error-output* "maps: ~a~%" line)))
