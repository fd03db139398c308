;;; emacs_driver.el --- drive editors/emacs/lsp-assist.el in batch mode  -*- lexical-binding: t; -*-

;; emacs --batch -l tests/editors/emacs_driver.el
;;
;; Environment: LSP_ASSIST_TEST_INIT (the set-up snippet of docs/editors.md, written
;; to a file by the test), LSP_ASSIST_TEST_SERVER (the program; "" keeps the
;; snippet's), LSP_ASSIST_TEST_SCENARIO (basic, capf, keys, early,
;; offline, model-error),
;; LSP_ASSIST_TEST_CASES (JSON list of {file, line (1-based), column (0-based)}),
;; LSP_ASSIST_TEST_SETTINGS (JSON), LSP_ASSIST_TEST_OUT (JSON report written here),
;; LSP_ASSIST_TEST_TIMEOUT_S.
;;
;; Keys are pressed with `execute-kbd-macro', which runs them through the command
;; loop as typing does: key lookup (with the maps active then), pre- and
;; post-command hooks.  Timers run while the driver waits in `accept-process-output'.

(require 'json)
(require 'cl-lib)
(require 'subr-x)

(defvar driver-report (list (cons 'emacs emacs-version)))
(defvar driver-errors nil)
(defvar driver-deadline nil)
(defvar driver-messages nil "Every message shown, in order.")

(defun driver-put (key value)
  (setq driver-report (cons (cons key value) driver-report)))

(defun driver-error (where err)
  (push (list (cons 'where where) (cons 'error (format "%S" err))) driver-errors))

(defun driver-write ()
  (driver-put 'errors (vconcat (nreverse driver-errors)))
  (driver-put 'messages (vconcat (reverse driver-messages)))
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
        ((and (consp value) (not (proper-list-p value))) (format "%S" value))
        ((consp value) (vconcat (mapcar #'driver-json value)))
        ((eq value t) t)
        ((symbolp value) (symbol-name value))
        (t value)))

(defun driver-bool (value)
  "VALUE as JSON true or false."
  (if value t :json-false))

(defmacro driver-step (name &rest body)
  "Run BODY; record an error under NAME instead of stopping."
  (declare (indent 1))
  `(condition-case err
       (progn ,@body)
     (error (driver-error ,name err) nil)))

(defun driver-wait (pred &optional seconds)
  "Wait until PRED is non-nil (at most SECONDS, or until the deadline); return it."
  (let ((until (min driver-deadline (+ (float-time) (or seconds 600))))
        value)
    (while (and (not (setq value (funcall pred))) (< (float-time) until))
      (accept-process-output nil 0.05))
    value))

(defun driver-idle (seconds)
  "Let timers and process output run for SECONDS."
  (let ((until (+ (float-time) seconds)))
    (while (< (float-time) until)
      (accept-process-output nil 0.05))))

(defun driver-keys (keys)
  "Press KEYS (`kbd' syntax) through the command loop."
  (execute-kbd-macro (kbd keys)))

(defun driver-line ()
  (buffer-substring-no-properties (line-beginning-position) (line-end-position)))

(defun driver-goto (line column)
  "Point to 1-based LINE, 0-based COLUMN (no command runs)."
  (goto-char (point-min))
  (forward-line (1- line))
  (move-to-column column))

(defun driver-mode-line ()
  "The lighter's text (`format-mode-line' gives \"\" in batch: no frame)."
  (lsp-assist--mode-line))

(defvar driver-states nil "States seen while waiting, in order, without repeats.")

(defun driver-note-state ()
  (let ((state (symbol-name (car (lsp-assist-state)))))
    (unless (equal state (car driver-states))
      (push state driver-states))))

(defun driver-open (file)
  "Visit FILE; wait until an lsp-assist server manages it; return the server."
  (find-file file)
  (driver-wait (lambda () (driver-note-state) (lsp-assist--buffer-server))))

(defun driver-wait-ready ()
  "Wait until the model is ready (state ready, or off if disabled) or failed."
  (driver-wait (lambda ()
                 (driver-note-state)
                 (memq (car (lsp-assist-state)) '(ready off error))))
  (car (lsp-assist-state)))

(defun driver-wait-preview (&optional seconds)
  "Wait for a suggestion to show; return its text."
  (driver-wait (lambda () (driver-note-state) (lsp-assist-preview-text)) (or seconds 60)))

(defun driver-request-time ()
  (plist-get lsp-assist-last-request :time))

(defun driver-wait-request-after (time &optional seconds)
  "Wait for a suggestion request sent after TIME; return its kind, or nil."
  (when (driver-wait (lambda () (let ((sent (driver-request-time)))
                                  (and sent (or (null time) (> sent time)))))
                     (or seconds 10))
    (symbol-name (plist-get lsp-assist-last-request :kind))))

(defun driver-settle ()
  "Wait for the request in flight to be answered."
  (driver-wait (lambda () (null lsp-assist--pending)) 60))

;;;; Scenarios

(defun driver-basic (server)
  "Capabilities, a raw completion, an automatic preview, direct insertion, commands."
  (driver-put 'capabilities (driver-json (eglot--capabilities server)))
  (driver-put 'server_info (driver-json (eglot--server-info server)))
  (driver-put 'capf_installed
              (and (memq #'lsp-assist-completion-at-point completion-at-point-functions) t))
  (driver-put 'mode_line_loading (driver-mode-line))
  (driver-put 'ready_state (symbol-name (driver-wait-ready)))
  (driver-put 'mode_line_ready (driver-mode-line))
  (let* ((case (car (driver-cases))))
    (driver-goto (alist-get 'line case) 0)
    ;; A cursor move (a command) asks for a suggestion by itself.
    (let ((before (driver-request-time)))
      (driver-keys "C-e")
      (driver-put 'auto_request_kind (driver-wait-request-after before))
      (driver-put 'auto_request_method (symbol-name (plist-get lsp-assist-last-request :method)))
      (driver-wait (lambda () (driver-note-state) (eq (car (lsp-assist-state)) 'thinking)) 5)
      (driver-put 'mode_line_thinking (driver-mode-line))
      (driver-put 'preview_text (driver-wait-preview))
      (driver-put 'inline_response (driver-json lsp-assist-last-response))
      (driver-settle)
      (driver-put 'mode_line_after (driver-mode-line)))
    (driver-step "textDocument/completion"
      (driver-put 'completion_response
                  (driver-json (car (lsp-assist--request-items server)))))
    (driver-step "accept"
      (let* ((item (lsp-assist--suggestion (lsp-assist--items lsp-assist-last-response)))
             (accept-response nil))
        (when item
          (driver-put 'line_before (driver-line))
          (cl-letf* ((orig (symbol-function 'lsp-assist--report-acceptance))
                     ((symbol-function 'lsp-assist--report-acceptance)
                      (lambda (s i) (setq accept-response (funcall orig s i)))))
            (driver-put 'inserted (lsp-assist--apply-item server item)))
          (driver-put 'line_after (driver-line))
          (driver-put 'accept_command (driver-json (plist-get item :command)))
          (driver-put 'accept_response (driver-json accept-response))))))
  ;; A model-loading $/progress, as a server that reports one sends it.
  (driver-step "progress"
    (let ((token "lsp-assist/model-test"))
      (eglot-handle-notification server '$/progress :token token
                                 :value '(:kind "begin" :title "lsp-assist: loading model"
                                                :percentage 10))
      (driver-put 'progress_begin (list (symbol-name (car (lsp-assist-state)))
                                        (driver-mode-line)))
      (eglot-handle-notification server '$/progress :token token
                                 :value '(:kind "report" :percentage 60))
      (driver-put 'progress_report (driver-mode-line))
      (eglot-handle-notification server '$/progress :token token
                                 :value '(:kind "end" :message "ready"))
      (driver-put 'progress_end (symbol-name (driver-wait-ready)))))
  (driver-put 'progress_seen (vconcat (delete-dups (reverse driver-progress-titles))))
  (driver-step "explain"
    (driver-put 'explain_text (lsp-assist-explain-context-text)))
  (driver-step "status"
    (driver-put 'status (driver-json (lsp-assist--execute "lspAssist.status" [])))))

(defvar driver-progress-titles nil "Titles of the $/progress the client recorded.")

(advice-add 'lsp-assist--set-state :after
            (lambda (_server &rest pairs)
              (dolist (entry (plist-get pairs :progress))
                (push (or (plist-get (cdr entry) :title) "") driver-progress-titles)))
            '((name . driver-progress)))

(defvar driver-capf-responses nil)

(defun driver-record-completion (response method &rest _)
  (when (eq method :textDocument/completion)
    (push response driver-capf-responses))
  response)

(defun driver-capf ()
  "C-M-i (completion-at-point) at each case; the line before and after, the item.
A case is skipped once one of the same kind got a suggestion (the kinds have
fallback positions, as the small model answers nothing at some places)."
  (advice-add 'jsonrpc-request :around
              (lambda (orig server method &rest args)
                (driver-record-completion (apply orig server method args) method))
              '((name . driver-record)))
  ;; Only eglot's completion-at-point asks: no automatic preview requests meanwhile.
  (lsp-assist-disable)
  (let (results done-kinds)
    (dolist (case (driver-cases))
      (let ((result (list (cons 'kind (alist-get 'kind case))
                          (cons 'file (alist-get 'file case)))))
        (unless (member (alist-get 'kind case) done-kinds)
          (driver-step (format "capf %s" (alist-get 'file case))
            (driver-open (alist-get 'file case))
            (push (cons 'ready (symbol-name (driver-wait-ready))) result)
            (driver-goto (alist-get 'line case) (alist-get 'column case))
            (push (cons 'before (driver-line)) result)
            (push (cons 'column (current-column)) result)
            (setq driver-capf-responses nil)
            (driver-keys "C-M-i")
            (push (cons 'after (driver-line)) result)
            (push (cons 'response (driver-json (car driver-capf-responses))) result)
            (when (lsp-assist--items (car driver-capf-responses))
              (push (alist-get 'kind case) done-kinds))
            (set-buffer-modified-p nil)))
        (push result results)))
    (driver-put 'cases (vconcat (nreverse results)))))

(defun driver-restore (line text)
  "Put TEXT back as LINE, point at its end, without running a command."
  (driver-goto line 0)
  (delete-region (line-beginning-position) (line-end-position))
  (insert text))

(defun driver-trigger-auto (line text)
  "Restore LINE to TEXT, move there with keys; wait for an automatic preview."
  (lsp-assist-dismiss)
  (driver-restore line text)
  (let ((before (driver-request-time)))
    (driver-keys "C-a C-e")
    (list (driver-wait-request-after before) (driver-wait-preview))))

(defun driver-keys-scenario ()
  "Preview keys, cycling, type-through, dismiss, manual trigger, enable/disable."
  (let* ((case (car (driver-cases)))
         (line (alist-get 'line case))
         (_ (driver-open (alist-get 'file case)))
         (_ (driver-put 'ready (symbol-name (driver-wait-ready))))
         (text (progn (driver-goto line 0) (driver-line)))
         (r (list)))
    (cl-flet ((put (k v) (push (cons k v) r)))
      ;; TAB accepts all.
      (put 'first (driver-trigger-auto line text))
      (put 'preview_active (driver-bool lsp-assist--preview-active))
      (put 'tab_binding (format "%s" (key-binding (kbd "TAB"))))
      (let ((shown (lsp-assist-preview-text)))
        (setq lsp-assist-last-acceptance nil)
        (driver-keys "TAB")
        (put 'tab_shown shown)
        (put 'tab_line (driver-line))
        (driver-wait (lambda () lsp-assist-last-acceptance) 10)
        (put 'tab_acceptance (driver-json lsp-assist-last-acceptance)))
      ;; M-f twice then C-e: word, word, rest of the line.
      (put 'second (driver-trigger-auto line text))
      (let ((shown (lsp-assist-preview-text)) steps)
        (dolist (keys '("M-f" "M-f" "C-e"))
          (driver-keys keys)
          (push (list keys (driver-line) (lsp-assist-preview-text)) steps))
        (put 'partial_shown shown)
        (put 'partial_steps (vconcat (mapcar #'vconcat (nreverse steps)))))
      ;; Typing the suggestion's first character keeps the rest, with no request.
      (put 'third (driver-trigger-auto line text))
      (let ((shown (lsp-assist-preview-text))
            (before (driver-request-time)))
        (execute-kbd-macro (substring shown 0 1))
        (put 'typed_shown shown)
        (put 'typed_line (driver-line))
        (put 'typed_preview (lsp-assist-preview-text))
        (put 'typed_requested (driver-bool (not (equal before (driver-request-time))))))
      ;; C-g dismisses; nothing comes back while point rests.
      (put 'fourth (driver-trigger-auto line text))
      (let ((before (driver-request-time)))
        (driver-keys "C-g")
        (put 'dismissed_line (driver-line))
        (put 'dismissed_preview (lsp-assist-preview-text))
        (driver-idle (* 4 (lsp-assist--debounce-seconds)))
        (put 'dismissed_requested (driver-bool (not (equal before (driver-request-time))))))
      ;; M-] after an automatic suggestion asks explicitly for alternatives and shows
      ;; the second of the server's answer.
      (put 'fifth (driver-trigger-auto line text))
      (let ((before (driver-request-time)))
        (driver-keys "M-]")
        (put 'cycle_request (driver-wait-request-after before))
        (driver-settle)
        (put 'cycle_preview (lsp-assist-preview-text))
        (put 'cycle_message (car driver-messages))
        (put 'cycle_choices
             (vconcat (mapcar (lambda (s) (plist-get s :text)) (cdr lsp-assist--choices))))
        ;; M-p goes back to the first: the server's answer is kept, nothing is asked.
        (let ((asked (driver-request-time)))
          (driver-keys "M-p")
          (put 'cycle_back (lsp-assist-preview-text))
          (put 'cycle_back_requested
               (driver-bool (not (equal asked (driver-request-time)))))))
      ;; C-c \ asks now, even with automatic suggestions off.
      (lsp-assist-dismiss)
      (call-interactively #'lsp-assist-disable)
      (put 'disabled_mode_line (driver-mode-line))
      (driver-restore line text)
      (let ((before (driver-request-time)))
        (driver-keys "C-a C-e")
        (driver-idle (* 4 (lsp-assist--debounce-seconds)))
        (put 'disabled_requested (driver-bool (not (equal before (driver-request-time)))))
        (driver-keys "C-c \\")
        (put 'manual_request (driver-wait-request-after before))
        (put 'manual_preview (driver-wait-preview)))
      (call-interactively #'lsp-assist-enable)
      (put 'enabled_again (driver-trigger-auto line text))
      ;; Per major mode.
      (lsp-assist-dismiss)
      (lsp-assist-disable-in-major-mode major-mode)
      (put 'mode_disabled_mode_line (driver-mode-line))
      (driver-restore line text)
      (let ((before (driver-request-time)))
        (driver-keys "C-a C-e")
        (driver-idle (* 4 (lsp-assist--debounce-seconds)))
        (put 'mode_disabled_requested (driver-bool (not (equal before (driver-request-time))))))
      (lsp-assist-enable-in-major-mode major-mode)
      (put 'mode_enabled_again (driver-trigger-auto line text))
      ;; Entering the buffer again asks for a suggestion.
      (lsp-assist-dismiss)
      (let ((file-buffer (current-buffer)))
        (driver-keys "C-x b *scratch* RET")
        (put 'other_buffer (buffer-name))
        (let ((before (driver-request-time)))
          (driver-keys (format "C-x b %s RET" (buffer-name file-buffer)))
          (put 'entered_buffer (buffer-name))
          (put 'entered_request (driver-wait-request-after before)))))
    (driver-put 'keys (nreverse r))))

;;;; Early answers

(defvar driver-initialize-params nil "The params of the `initialize' request eglot sent.")

(advice-add 'jsonrpc-async-request :before
            (lambda (_connection method params &rest _)
              (when (eq method :initialize)
                (setq driver-initialize-params params)))
            '((name . driver-initialize)))

(defun driver-notice-count ()
  (length lsp-assist-ready-notices))

(defun driver-await-refresh (notices refreshes)
  "Wait for a notice after NOTICES and, if acted on, its answer after REFRESHES.
Return (ACTION TEXT-SHOWN-AFTER)."
  ;; ~0.3 s on an idle machine; tens of seconds on a loaded one.
  (when (driver-wait (lambda () (> (driver-notice-count) notices)) 60)
    (let ((action (plist-get (car lsp-assist-ready-notices) :action)))
      (when (equal action "refresh")
        (driver-wait (lambda () (> (length lsp-assist-refreshes) refreshes)) 10))
      (list action (lsp-assist-preview-text)))))

(defun driver-notify (server params)
  "Hand PARAMS to the lspAssist/suggestionReady handler; what it did and showed."
  (let ((notices (driver-notice-count))
        (refreshes (length lsp-assist-refreshes))
        (overlay lsp-assist--overlay)
        (sent (driver-request-time)))
    (apply #'eglot-handle-notification server 'lspAssist/suggestionReady params)
    (let ((action (plist-get (car lsp-assist-ready-notices) :action)))
      (when (equal action "refresh")
        (driver-wait (lambda () (> (length lsp-assist-refreshes) refreshes)) 10))
      (list (cons 'action (and (> (driver-notice-count) notices) action))
            (cons 'requested (driver-bool (not (equal sent (driver-request-time)))))
            (cons 'preview (lsp-assist-preview-text))
            (cons 'same_overlay (driver-bool (and overlay (eq overlay lsp-assist--overlay))))
            (cons 'refresh (and (> (length lsp-assist-refreshes) refreshes)
                                (driver-json (car lsp-assist-refreshes))))))))

(defun driver-early (server)
  "The start of a suggestion, then the whole after lspAssist/suggestionReady.
First after typing the start's first character, then with point resting; then
notices handed to the handler: the same text, another buffer, a malformed one,
a request in flight, a dismissed suggestion."
  (driver-put 'sent_experimental
              (driver-json (plist-get (plist-get driver-initialize-params :capabilities)
                                      :experimental)))
  (driver-put 'ready (symbol-name (driver-wait-ready)))
  (let* ((case (car (driver-cases)))
         (line (alist-get 'line case))
         (text (progn (driver-goto line 0) (driver-line)))
         (typed (alist-get 'typed case))
         r)
    (cl-flet ((put (k v) (push (cons k v) r)))
      ;; Typing the first character of the start. First: this place extends the other,
      ;; whose whole suggestion in the server's cache would answer it at once.
      (let* ((notices (driver-notice-count))
             (refreshes (length lsp-assist-refreshes))
             (first (cadr (driver-trigger-auto line (concat text typed)))))
        (put 'typed_first first)
        (put 'typed_notice_before (driver-bool (> (driver-notice-count) notices)))
        (when first
          (execute-kbd-macro (substring first 0 1)))
        (put 'typed_preview (lsp-assist-preview-text))
        ;; The notice may have come before the key: its refresh then answered for the
        ;; place before it and was dropped, and the whole comes from the next request.
        (put 'typed_after (if (> (driver-notice-count) notices)
                              (progn
                                (driver-wait (lambda () (lsp-assist-preview-text)) 20)
                                (list (plist-get (car lsp-assist-ready-notices) :action)
                                      (lsp-assist-preview-text)))
                            (driver-await-refresh notices refreshes)))
        (put 'typed_line (driver-line))
        (put 'typed_refresh (driver-json (car lsp-assist-refreshes))))
      ;; Point rests after the start shows.
      (let* ((notices (driver-notice-count))
             (refreshes (length lsp-assist-refreshes))
             (first (cadr (driver-trigger-auto line text))))
        (put 'rest_first first)
        (put 'rest_after (driver-await-refresh notices refreshes))
        (put 'rest_line (driver-line))
        (put 'rest_notice (driver-json (car lsp-assist-ready-notices))))
      ;; Notices handed to the handler directly.
      (let* ((notice (car lsp-assist-ready-notices))
             (params (list :textDocument (list :uri (plist-get notice :uri) :version 1)
                           :position (plist-get notice :position))))
        (put 'same (driver-notify server params))
        (put 'other_buffer
             (driver-notify server (plist-put (copy-sequence params) :textDocument
                                              '(:uri "file:///elsewhere/other.py" :version 1))))
        (put 'malformed (driver-notify server (list :position '(:line 0))))
        (let ((lsp-assist--pending (cons server -1)))
          (put 'in_flight (driver-notify server params)))
        (driver-keys "C-g")
        (put 'dismissed (driver-notify server params))))
    (driver-put 'early (nreverse r)))
  (driver-put 'notices (driver-json (reverse lsp-assist-ready-notices)))
  (driver-step "status"
    (let ((status (lsp-assist--execute "lspAssist.status" [])))
      (driver-put 'status_last (driver-json (plist-get status :last)))
      (driver-put 'typethrough (driver-json (plist-get status :typethrough))))))

(defun driver-offline ()
  "No server: the missing-program message once; the preview keys on a fake suggestion."
  (let ((files (mapcar (lambda (c) (alist-get 'file c)) (driver-cases))))
    (dolist (file files)
      (find-file file)
      (driver-idle 0.2)
      (driver-keys "C-n"))
    (driver-put 'mode_on (vconcat (mapcar (lambda (file)
                                            (with-current-buffer (get-file-buffer file)
                                              (driver-bool lsp-assist-mode)))
                                          files)))
    (driver-put 'lighter_shown (driver-bool (and lsp-assist-mode (lsp-assist--mode-line))))
    (driver-put 'eglot_managed (driver-bool (bound-and-true-p eglot--managed-mode))))
  ;; The preview map and the accept/cycle commands, on suggestions given directly.
  (with-current-buffer (get-buffer-create "keys.py")
    (python-mode)
    (switch-to-buffer (current-buffer))
    (insert "def f(x):\n    ret")
    (let (r)
      (cl-flet ((put (k v) (push (cons k v) r))
                (show (&rest texts)
                  (lsp-assist--show-choices (mapcar (lambda (s) (list :text s :delete 0)) texts) t)))
        (show " = scale(result, 10)\n    return ret")
        (put 'tab_binding (format "%s" (key-binding (kbd "TAB"))))
        (let (steps)
          (dolist (keys '("M-f" "M-<right>" "M-f" "C-e" "C-M-<right>"))
            (driver-keys keys)
            (push (vector keys (buffer-substring-no-properties (point-min) (point))
                          (lsp-assist-preview-text))
                  steps))
          (put 'steps (vconcat (nreverse steps))))
        (show "X = 1")
        (driver-keys "TAB")
        (put 'tab_text (buffer-substring-no-properties (line-beginning-position) (point)))
        (put 'no_preview_tab (format "%s" (key-binding (kbd "TAB"))))
        (show "a1" "b2" "c3")
        (let (seen)
          (dolist (keys '("M-]" "M-]" "M-]" "M-p" "M-p" "M-n"))
            (driver-keys keys)
            (push (lsp-assist-preview-text) seen))
          (put 'cycled (vconcat (nreverse seen))))
        ;; M-[ is not lsp-assist's in any frame: in a terminal it is the ESC [ of
        ;; escape sequences (it would swallow the next key, or take M-<right>).
        (put 'meta_bracket (format "%s" (lookup-key lsp-assist-preview-map (kbd "M-["))))
        (driver-keys "C-]")
        (put 'after_dismiss (lsp-assist-preview-text))
        (put 'words (vconcat (mapcar #'lsp-assist--next-word
                                     '(" = scale(x)" "(x)" "foo.bar" "\n    return 1" "  "))))
        (put 'lines (vconcat (mapcar #'lsp-assist--next-line
                                     '("a = 1\nb = 2" "\nb = 2\nc" "tail")))))
      (driver-put 'pure (nreverse r)))))

(defun driver-model-error ()
  "A server whose model cannot load: the mode line says error; doctor runs."
  (let ((file (alist-get 'file (car (driver-cases)))))
    (driver-open file)
    (driver-put 'state (symbol-name (driver-wait-ready)))
    (driver-put 'mode_line (driver-mode-line))
    (driver-put 'details (driver-json (cadr (lsp-assist-state))))
    (driver-step "doctor"
      (let* ((buffer (lsp-assist-doctor)))
        (driver-wait (lambda () (with-current-buffer buffer
                                  (save-excursion
                                    (goto-char (point-min))
                                    (search-forward "[lsp-assist doctor exited" nil t))))
                     60)
        (driver-put 'doctor_output (with-current-buffer buffer (buffer-string)))))))

(defun driver-cases ()
  (append (json-parse-string (or (getenv "LSP_ASSIST_TEST_CASES") "[]")
                             :object-type 'alist)
          nil))

(let* ((scenario (or (getenv "LSP_ASSIST_TEST_SCENARIO") "basic"))
       (program (getenv "LSP_ASSIST_TEST_SERVER"))
       (timeout (string-to-number (or (getenv "LSP_ASSIST_TEST_TIMEOUT_S") "90")))
       (settings (json-parse-string (or (getenv "LSP_ASSIST_TEST_SETTINGS") "{}")
                                    :object-type 'plist)))
  (setq driver-deadline (+ (float-time) timeout))
  (advice-add 'message :after
              (lambda (format-string &rest args)
                (when format-string
                  (push (apply #'format-message format-string args) driver-messages)))
              '((name . driver-messages)))
  (unwind-protect
      (driver-step "driver"
        ;; The documented set-up, as a user's init file would run it.
        (load (getenv "LSP_ASSIST_TEST_INIT") nil t)
        (driver-put 'eglot_library (locate-library "eglot"))
        (driver-put 'global_mode (and (bound-and-true-p global-lsp-assist-mode) t))
        (when (and program (not (string-empty-p program)))
          (setq lsp-assist-command (list program "serve")))
        (setq lsp-assist-settings settings
              lsp-assist-debounce-ms 100
              eglot-sync-connect timeout
              eglot-connect-timeout timeout
              ;; A loaded machine may take a while; the test checks answers, not speed.
              jsonrpc-default-request-timeout 60
              lsp-assist-request-timeout 60)
        (pcase scenario
          ("offline" (driver-offline))
          ("model-error" (driver-model-error))
          (_
           (let ((server (driver-open (alist-get 'file (car (driver-cases))))))
             (driver-put 'connected (and server (jsonrpc-running-p server) t))
             (driver-put 'major_mode (symbol-name major-mode))
             (driver-put 'managed (driver-bool (bound-and-true-p eglot--managed-mode)))
             (driver-put 'lsp_assist_server (and (lsp-assist--server-p server) t))
             (when server
               (pcase scenario
                 ("basic" (driver-basic server))
                 ("capf" (driver-capf))
                 ("keys" (driver-keys-scenario))
                 ("early" (driver-early server))))))))
    (driver-put 'states (vconcat (reverse driver-states)))
    (driver-write)
    (dolist (servers (and (boundp 'eglot--servers-by-project)
                          (hash-table-values eglot--servers-by-project)))
      (dolist (server servers)
        (ignore-errors (eglot-shutdown server))))
    (kill-emacs 0)))

;;; emacs_driver.el ends here
