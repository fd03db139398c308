;;; emacs_driver.el --- drive editors/emacs/lsp-assist.el in batch mode  -*- lexical-binding: t; -*-

;; emacs --batch -l tests/editors/emacs_driver.el
;;
;; Environment: LSP_ASSIST_TEST_PLUGIN (editors/emacs), LSP_ASSIST_TEST_SERVER,
;; LSP_ASSIST_TEST_FILE, LSP_ASSIST_TEST_LINE (1-based; point goes to its end),
;; LSP_ASSIST_TEST_TYPE (inserted there), LSP_ASSIST_TEST_SETTINGS (JSON),
;; LSP_ASSIST_TEST_OUT (JSON report written here), LSP_ASSIST_TEST_TIMEOUT_S.
;;
;; Starts eglot with lsp-assist's registration (no hook: `eglot' is called directly,
;; as `eglot-ensure' waits for a command loop batch mode does not have), records the
;; capabilities the server sent, asks for completions through eglot's own
;; completion-at-point and through `lsp-assist-complete' (which inserts the suggestion
;; and reports the acceptance), runs the explain and status commands, and writes what
;; it saw as JSON.

(require 'json)
(require 'cl-lib)

(defvar driver-report (list (cons 'emacs emacs-version)))
(defvar driver-errors nil)

(defun driver-put (key value)
  (setq driver-report (cons (cons key value) driver-report)))

(defun driver-error (where err)
  (push (list (cons 'where where) (cons 'error (format "%S" err))) driver-errors))

(defun driver-write ()
  (driver-put 'errors (vconcat (nreverse driver-errors)))
  (let ((json-encoding-pretty-print nil)
        (coding-system-for-write 'utf-8))
    (with-temp-file (getenv "LSP_ASSIST_TEST_OUT")
      (insert (json-encode driver-report)))))

(defun driver-json (value)
  "VALUE (a jsonrpc plist / vector) as something json-encode writes faithfully."
  (cond ((eq value :json-false) :json-false)
        ((eq value nil) nil)
        ((vectorp value) (vconcat (mapcar #'driver-json value)))
        ((and (consp value) (keywordp (car value)))
         (cl-loop for (k v) on value by #'cddr
                  collect (cons (substring (symbol-name k) 1) (driver-json v))))
        (t value)))

(defmacro driver-step (name &rest body)
  "Run BODY; record an error under NAME instead of stopping."
  (declare (indent 1))
  `(condition-case err
       (progn ,@body)
     (error (driver-error ,name err) nil)))

(let* ((plugin (getenv "LSP_ASSIST_TEST_PLUGIN"))
       (file (getenv "LSP_ASSIST_TEST_FILE"))
       (line (string-to-number (or (getenv "LSP_ASSIST_TEST_LINE") "1")))
       (typed (or (getenv "LSP_ASSIST_TEST_TYPE") ""))
       (timeout (string-to-number (or (getenv "LSP_ASSIST_TEST_TIMEOUT_S") "90")))
       (settings (json-parse-string (or (getenv "LSP_ASSIST_TEST_SETTINGS") "{}")
                                    :object-type 'plist))
       (deadline (+ (float-time) timeout))
       server)
  (unwind-protect
      (driver-step "driver"
        (add-to-list 'load-path plugin)
        (require 'lsp-assist)
        (driver-put 'eglot_library (locate-library "eglot"))
        (setq lsp-assist-command (list (getenv "LSP_ASSIST_TEST_SERVER") "serve"))
        (setq lsp-assist-settings settings)
        (setq eglot-sync-connect timeout
              eglot-connect-timeout timeout
              ;; A loaded machine may take a while; the test checks answers, not speed.
              jsonrpc-default-request-timeout 60
              lsp-assist-request-timeout 60)
        (lsp-assist-setup)
        (driver-put 'registered (and (eq (cdr (car eglot-server-programs)) #'lsp-assist--contact) t))
        (find-file file)
        (driver-put 'major_mode (symbol-name major-mode))
        (driver-step "eglot"
          (apply #'eglot (eglot--guess-contact)))
        (while (and (not (and (eglot-current-server)
                              (eglot--capabilities (eglot-current-server))))
                    (< (float-time) deadline))
          (accept-process-output nil 0.1))
        (setq server (eglot-current-server))
        (driver-put 'connected (and server (jsonrpc-running-p server) t))
        (when server
          (driver-put 'managed (and eglot--managed-mode t))
          (driver-put 'server_info (driver-json (eglot--server-info server)))
          (driver-put 'capabilities (driver-json (eglot--capabilities server)))
          (driver-put 'lsp_assist_server (and (lsp-assist--server-p server) t))
          (driver-put 'capf_installed
                      (and (memq #'lsp-assist-completion-at-point completion-at-point-functions) t))
          (goto-char (point-min))
          (forward-line (1- line))
          (end-of-line)
          (insert typed)
          ;; 1. The raw request through eglot's connection, retried while the model
          ;;    loads (an empty list then).
          (let ((attempt 0) response items)
            (while (and (< attempt 20) (< (float-time) deadline)
                        (progn
                          (driver-step "textDocument/completion"
                            (let ((got (lsp-assist--request-items server)))
                              (setq response (car got) items (cdr got))))
                          (null (lsp-assist--suggestion items))))
              (setq attempt (1+ attempt))
              (sleep-for 0.5))
            (driver-put 'completion_attempts (1+ attempt))
            (driver-put 'completion_response (driver-json response))
            (driver-put 'completion_items (length items))
            ;; 2. eglot's own completion-at-point (what M-TAB / company / corfu call),
            ;;    now that the server is warm.
            (driver-step "completion-at-point"
              (let* ((capf (lsp-assist-completion-at-point))
                     (table (nth 2 capf))
                     (candidates (and table (all-completions "" table))))
                (driver-put 'capf_returned (and capf t))
                (driver-put 'capf_candidates (vconcat candidates))))
            (let ((item (lsp-assist--suggestion items)))
              ;; 3. lsp-assist-preview-mode: the asynchronous request and the overlay.
              (when item
                (driver-step "preview"
                  (lsp-assist-preview-mode 1)
                  (lsp-assist--request-preview (current-buffer))
                  (let ((wait-until (min deadline (+ (float-time) 30))))
                    (while (and (null lsp-assist--overlay) (< (float-time) wait-until))
                      (accept-process-output nil 0.1)))
                  (driver-put 'preview_text
                              (and lsp-assist--overlay
                                   (substring-no-properties
                                    (overlay-get lsp-assist--overlay 'after-string))))
                  (lsp-assist-preview-mode -1)))
              (when item
                (driver-step "accept"
                  (let* ((before (buffer-substring-no-properties
                                  (line-beginning-position) (line-end-position)))
                         (inserted nil)
                         (accept-response nil))
                    (cl-letf* ((orig (symbol-function 'lsp-assist--report-acceptance))
                               ((symbol-function 'lsp-assist--report-acceptance)
                                (lambda (s i)
                                  (setq accept-response (funcall orig s i)))))
                      (setq inserted (lsp-assist--apply-item server item)))
                    (driver-put 'line_before before)
                    (driver-put 'inserted inserted)
                    (driver-put 'buffer_after (buffer-substring-no-properties
                                               (point-min) (point-max)))
                    (driver-put 'accept_command (driver-json (plist-get item :command)))
                    (driver-put 'accept_response (driver-json accept-response)))))))
          (driver-step "explain"
            (driver-put 'explain_text (lsp-assist-explain-context-text)))
          (driver-step "status"
            (driver-put 'status (driver-json (lsp-assist--execute "lspAssist.status" []))))))
    (driver-write)
    (when (and server (jsonrpc-running-p server))
      (ignore-errors (eglot-shutdown server)))
    (kill-emacs 0)))

;;; emacs_driver.el ends here
