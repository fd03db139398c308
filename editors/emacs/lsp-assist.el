;;; lsp-assist.el --- Local AI code completions from lsp-assist through eglot  -*- lexical-binding: t; -*-

;; Version: 0.3.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: convenience, languages, tools
;; SPDX-License-Identifier: Apache-2.0

;;; Commentary:

;; Runs `lsp-assist serve' (a language server with a GGUF model in its own process)
;; through eglot for Python, JavaScript/TypeScript, Go, Rust, Java, C and C++, and
;; shows its suggestion as grey text after point.
;;
;;   (add-to-list 'load-path "/path/to/lsp-assist/editors/emacs")
;;   (require 'lsp-assist)
;;   (setq lsp-assist-command '("/path/to/lsp-assist/.venv/bin/lsp-assist" "serve"))
;;   (global-lsp-assist-mode 1)
;;
;; `lsp-assist-mode' (turned on by `global-lsp-assist-mode' in the buffers of
;; `lsp-assist-modes') starts eglot, asks for a suggestion `lsp-assist-debounce-ms'
;; (75) after each key or move (a new request cancels the one still out) and on
;; entering the buffer, and shows it after point.  While a suggestion shows,
;; `lsp-assist-preview-map' is active: TAB accepts it, M-f a word, C-e a line, M-n
;; and M-p cycle alternatives, C-g dismisses it.  C-c \ asks for one now.  The
;; mode line shows the server's state: loading, ready (with the latency of the last
;; suggestion), thinking, error, or off.
;;
;; No eglot release speaks textDocument/inlineCompletion, so this package sends it
;; itself over eglot's connection; `completion-at-point' (C-M-i, company, corfu)
;; lists the same suggestion through the server's textDocument/completion item.
;;
;; Early answers: the client sets capabilities.experimental.lspAssistSuggestionReady,
;; so a server that answered with the start of a suggestion (answerAfterMs) sends
;; lspAssist/suggestionReady when the whole of it is in its cache; if that start still
;; shows (point rested, or typed through it) and no request is out, lsp-assist asks
;; again at point (the cache answers) and shows the longer text.
;;
;; Eglot runs one server per major mode: for the modes listed in `lsp-assist-modes'
;; lsp-assist replaces any other server eglot would start (pylsp, gopls ...).  The
;; server picks the language from the file name, so one process (one model in
;; memory) serves every language of a project.

;;; Code:

(require 'cl-lib)
(require 'eglot)
(require 'jsonrpc)
(require 'project)
(require 'subr-x)

(defgroup lsp-assist nil
  "Local AI code completions from the lsp-assist language server."
  :group 'tools
  :prefix "lsp-assist-")

(defcustom lsp-assist-command '("lsp-assist" "serve")
  "Command that starts the server on stdio: the program, then its arguments.
After `make' in a checkout the program is .venv/bin/lsp-assist there."
  :type '(repeat string))

(defcustom lsp-assist-settings nil
  "Server settings as a plist of flat camelCase keywords.
For example (:modelPath \"/models/qwen2.5-coder-1.5b-q4_k_m.gguf\"
:draft \"prompt-lookup\"); leave :contextBudget unset so the budget adapts.
Sent as initializationOptions when the server starts; change them at run
time with `lsp-assist-set-settings'.
See docs/configuration.md for every key."
  :type 'plist)

(defcustom lsp-assist-modes
  '((python-mode :language-id "python")
    (python-ts-mode :language-id "python")
    (js-mode :language-id "javascript")
    (js-ts-mode :language-id "javascript")
    (typescript-mode :language-id "typescript")
    (typescript-ts-mode :language-id "typescript")
    (tsx-ts-mode :language-id "typescriptreact")
    (go-mode :language-id "go")
    (go-ts-mode :language-id "go")
    (rust-mode :language-id "rust")
    (rust-ts-mode :language-id "rust")
    (java-mode :language-id "java")
    (java-ts-mode :language-id "java")
    (c-mode :language-id "c")
    (c-ts-mode :language-id "c")
    (c++-mode :language-id "cpp")
    (c++-ts-mode :language-id "cpp"))
  "Major modes whose buffers lsp-assist manages, in `eglot-server-programs' form."
  :type '(repeat sexp))

(defcustom lsp-assist-enabled t
  "Non-nil: suggestions show by themselves.  See `lsp-assist-disable'.
When nil, only an explicit request (\\[lsp-assist-suggest]) shows one."
  :type 'boolean)

(defcustom lsp-assist-disabled-modes nil
  "Major modes (and modes derived from them) without automatic suggestions.
See `lsp-assist-disable-in-major-mode' and `lsp-assist-enable-in-major-mode'."
  :type '(repeat symbol))

(define-obsolete-variable-alias 'lsp-assist-preview-delay 'lsp-assist-delay "0.2.0")

(defcustom lsp-assist-debounce-ms 75
  "Milliseconds after a command before lsp-assist asks for a suggestion.
After any command that moved point or changed the text.  A timer restarted
by each command, short enough to fire between the keys of a steady typist
\(one every 150-200 ms), as the Neovim plugin's debounce_ms.  A new request
cancels the one still out ($/cancelRequest), not the key before it: a request
that ends in between fills the server's type-through cache, which then
answers the new one at once."
  :type 'integer)

(defcustom lsp-assist-delay nil
  "Obsolete: seconds point must rest before asking; nil uses the debounce.
A number here wins over `lsp-assist-debounce-ms' (as before 0.3.0, when the
default was 0.3 s, which never elapsed between the keys of a steady typist,
so nothing showed while typing)."
  :type '(choice (const :tag "Use lsp-assist-debounce-ms" nil) number))

(make-obsolete-variable 'lsp-assist-delay 'lsp-assist-debounce-ms "0.3.0")

(defun lsp-assist--debounce-seconds ()
  "Seconds to wait after a command before asking for a suggestion.
`lsp-assist-debounce-ms', or the obsolete `lsp-assist-delay' when a number."
  (let ((delay (with-no-warnings lsp-assist-delay)))
    (if (numberp delay)
        delay
      (/ (max 0 (or lsp-assist-debounce-ms 0)) 1000.0))))

(defcustom lsp-assist-report-cursor-delay 0.3
  "Seconds point must rest after a move (not an edit) before saying where.
The server then evaluates the prompt there (lspAssist/didMoveCursor), so
the first suggestion where you start typing needs no cold prompt.
nil: never."
  :type '(choice (const :tag "Never" nil) number))

(defcustom lsp-assist-request-timeout 20
  "Seconds to wait for the server's answer.
The first request of a session may wait for the model to load."
  :type 'number)

(defcustom lsp-assist-status-interval 1.0
  "Seconds between status requests while the server loads its model."
  :type 'number)

(defcustom lsp-assist-lighter "✨"
  "Mode-line text in front of lsp-assist's state."
  :type 'string)

(defface lsp-assist-preview-face
  '((t :inherit shadow))
  "Face of the suggestion shown after point.")

(defconst lsp-assist--accept-command "lspAssist.accept")

(defvar lsp-assist-last-request nil
  "The last suggestion request sent: plist (:kind :method :time).")

(defvar lsp-assist-last-response nil
  "The last answer to a suggestion request (for debugging).")

(defvar lsp-assist-last-acceptance nil
  "The server's answer to the last lspAssist.accept sent from the preview.")

(defvar lsp-assist-telemetry nil
  "The telemetry notifications sent, newest first (at most 50).
Each is a plist (:method :item :accepted-length): the method
(textDocument/didShowCompletion, textDocument/didPartiallyAcceptCompletion or
lspAssist/didDismissCompletion), the item's id (its command's argument) and,
for a partial accept, the length sent.")

;;;; The server program

(defvar lsp-assist-mode)
(defvar lsp-assist--last-key)
(defvar-local lsp-assist--connect-error nil
  "Why eglot could not connect this buffer, or nil.")
(defvar lsp-assist--connecting nil
  "(PROJECT . TIME) for each eglot connection lsp-assist started and not yet up.")
(defvar-local lsp-assist--project nil
  "The project this buffer asked eglot to connect, or nil.")
(defvar-local lsp-assist--exit nil
  "How this buffer's server went away: plist (:code :stderr :when), or nil.
:stderr is the server's stderr buffer, read when the reason is shown.")

(defun lsp-assist--program-found-p ()
  "Non-nil when the program of `lsp-assist-command' exists and is executable."
  (let ((program (car-safe lsp-assist-command)))
    (and (stringp program)
         (if (file-name-absolute-p program)
             (file-executable-p program)
           (executable-find program)))))

(defun lsp-assist--missing-message ()
  "The message for a server program that cannot be run."
  (format "lsp-assist not found; set lsp-assist-command (tried %s)"
          (or (car-safe lsp-assist-command) "nothing")))

(defvar lsp-assist--warned-command 'none
  "The `lsp-assist-command' last reported missing: say it once, not per buffer.")

(defun lsp-assist--warn-missing ()
  "Say once per `lsp-assist-command' value that its program is missing."
  (unless (equal lsp-assist--warned-command lsp-assist-command)
    (setq lsp-assist--warned-command lsp-assist-command)
    (let ((text (lsp-assist--missing-message)))
      (if (or noninteractive after-init-time)
          (message "%s" text)
        ;; During start-up the echo area is overwritten; say it once Emacs waits.
        (run-with-idle-timer 0 nil #'message "%s" text)))))

;;;; Eglot registration

(defun lsp-assist--initialization-options (&optional _server)
  "Return `lsp-assist-settings' as the initializationOptions JSON object."
  (or lsp-assist-settings eglot--{}))

(defun lsp-assist--contact (&optional _interactive)
  "Return the eglot contact: `lsp-assist-command' with the initializationOptions."
  (unless (lsp-assist--program-found-p)
    (user-error "%s" (lsp-assist--missing-message)))
  (append lsp-assist-command
          (list :initializationOptions #'lsp-assist--initialization-options)))

(defun lsp-assist--registered-p ()
  "Non-nil when `eglot-server-programs' holds lsp-assist's entry."
  (cl-find #'lsp-assist--contact eglot-server-programs :key #'cdr))

;;;###autoload
(defun lsp-assist-setup ()
  "Register lsp-assist with eglot for `lsp-assist-modes', ahead of other servers.
`lsp-assist-mode' calls it; call it yourself to use plain \\[eglot]."
  (interactive)
  (setq eglot-server-programs
        (cons (cons lsp-assist-modes #'lsp-assist--contact)
              (cl-remove #'lsp-assist--contact eglot-server-programs :key #'cdr)))
  (add-hook 'eglot-managed-mode-hook #'lsp-assist--managed-hook))

(defun lsp-assist--server-p (server)
  "Non-nil when SERVER is an lsp-assist server (it offers lspAssist.accept)."
  (and server
       (let* ((caps (eglot--capabilities server))
              (commands (plist-get (plist-get caps :executeCommandProvider) :commands)))
         (and commands (seq-contains-p commands lsp-assist--accept-command)))))

(defun lsp-assist--buffer-server ()
  "The lsp-assist server managing the current buffer, or nil."
  (when (bound-and-true-p eglot--managed-mode)
    (let ((server (eglot-current-server)))
      (and (lsp-assist--server-p server) server))))

(defun lsp-assist--server ()
  "Return the lsp-assist server managing the current buffer, or signal an error.
The error says why there is none: the server exited (and how to restart it),
it is still starting, or the buffer is not in `lsp-assist-mode'."
  (or (lsp-assist--buffer-server)
      (cond (lsp-assist--exit
             (user-error "%s" (lsp-assist--exit-message lsp-assist--exit)))
            (lsp-assist--connect-error
             (user-error "lsp-assist: %s; fix it, then M-x lsp-assist-restart"
                         lsp-assist--connect-error))
            ((and lsp-assist-mode lsp-assist--project
                  (assoc lsp-assist--project lsp-assist--connecting))
             (user-error "lsp-assist: the server is still starting"))
            (t (user-error "lsp-assist: this buffer is not managed by lsp-assist \
(M-x lsp-assist-mode)")))))

(defun lsp-assist--managed-hook ()
  "In buffers an lsp-assist server manages: capf, status, a first suggestion."
  (when-let ((server (lsp-assist--buffer-server)))
    (setq lsp-assist--connecting
          (cl-remove (eglot--project server) lsp-assist--connecting :key #'car :test #'equal))
    (setq lsp-assist--exit nil
          lsp-assist--connect-error nil
          lsp-assist--project (eglot--project server))
    (setq-local completion-at-point-functions
                (cons #'lsp-assist-completion-at-point
                      (remq #'eglot-completion-at-point completion-at-point-functions)))
    (lsp-assist--poll-status server)
    (when lsp-assist-mode
      (setq lsp-assist--last-key nil)
      (lsp-assist--schedule)))
  (force-mode-line-update t))

(defun lsp-assist--connect (buffer)
  "Make eglot manage BUFFER with lsp-assist, starting the server if none runs."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (when (and lsp-assist-mode buffer-file-name
                 (not (bound-and-true-p eglot--managed-mode)))
        (condition-case err
            (if (eglot-current-server)
                (eglot--maybe-activate-editing-mode)
              (let* ((contact (eglot--guess-contact))
                     (project (nth 1 contact))
                     (pending (assoc project lsp-assist--connecting)))
                ;; eglot registers a server only once it initialized: without this, a
                ;; second buffer would start a second process meanwhile.
                (setq lsp-assist--project project
                      lsp-assist--exit nil
                      lsp-assist--connect-error nil)
                (unless (and pending (< (- (float-time) (cdr pending)) 60))
                  (push (cons project (float-time)) lsp-assist--connecting)
                  (apply #'eglot--connect contact))))
          (error
           (setq lsp-assist--connecting nil)
           (if lsp-assist--exit
               ;; The server died during the handshake: its reason, not eglot's -1.
               (message "%s" (lsp-assist--exit-message lsp-assist--exit))
             (setq lsp-assist--connect-error (error-message-string err))
             (message "lsp-assist: %s" lsp-assist--connect-error))
           (force-mode-line-update)))))))

;;;; A server that exits

(defun lsp-assist--stderr-tail (buffer &optional lines)
  "The last LINES (2) non-blank lines of the stderr BUFFER, joined by \" | \"."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (let ((text (string-trim (buffer-substring-no-properties (point-min) (point-max)))))
        (unless (string-empty-p text)
          (let ((server-lines
                 ;; Emacs's own line when the pipe closes is not the server's.
                 (cl-remove-if (lambda (line) (string-match-p "\\`Process .* finished\\'" line))
                               (split-string text "[ \t]*\n[ \t\n]*" t))))
            (and server-lines
                 (mapconcat #'identity (last server-lines (or lines 2)) " | "))))))))

(defun lsp-assist--exit-reason (exit)
  "The short reason of EXIT (see `lsp-assist--exit'): \"server exited with code 2\"."
  (format "server exited with code %s" (plist-get exit :code)))

(defun lsp-assist--exit-message (exit)
  "What to tell the user about EXIT: the code, the server's last words, the fix."
  (let ((tail (lsp-assist--stderr-tail (plist-get exit :stderr))))
    (format "lsp-assist: %s%s; check lsp-assist-command (%s), then M-x lsp-assist-restart"
            (lsp-assist--exit-reason exit)
            (if tail (format ": %s" tail) "")
            (combine-and-quote-strings lsp-assist-command))))

(defun lsp-assist--project-buffers (project)
  "The live buffers in `lsp-assist-mode' that belong to PROJECT."
  (cl-remove-if-not (lambda (buffer)
                      (with-current-buffer buffer
                        (and lsp-assist-mode (equal lsp-assist--project project))))
                    (buffer-list)))

(defun lsp-assist--on-shutdown (server)
  "Before eglot forgets SERVER: if it was lsp-assist's and exited unasked, say so.
Its buffers keep the exit code and stderr for the mode line and the commands."
  (when (and (lsp-assist--own-connection-p server)
             (not (eglot--shutdown-requested server)))
    (let* ((proc (jsonrpc--process server))
           (project (eglot--project server))
           (stderr (ignore-errors (jsonrpc-stderr-buffer server)))
           (exit (list :code (and proc (process-exit-status proc)) :stderr stderr
                       :when (float-time)))
           (buffers (delete-dups (append (lsp-assist--project-buffers project)
                                         (eglot--managed-buffers server)))))
      ;; The stderr pipe may still hold the server's last lines.
      (when-let ((pipe (and (buffer-live-p stderr) (get-buffer-process stderr))))
        (accept-process-output pipe 0.2))
      (setq lsp-assist--connecting
            (cl-remove project lsp-assist--connecting :key #'car :test #'equal))
      (dolist (buffer buffers)
        (with-current-buffer buffer
          (setq lsp-assist--exit exit
                lsp-assist--project project)
          (lsp-assist--cancel-pending)
          (lsp-assist--clear-preview)))
      (when buffers
        (let ((text (lsp-assist--exit-message exit)))
          ;; After eglot's own "-1: Server died", which would hide it.
          (run-with-timer 0.1 nil #'message "%s" text)))
      (force-mode-line-update t))))

(advice-add 'eglot--on-shutdown :before #'lsp-assist--on-shutdown
            '((name . lsp-assist)))

;;;###autoload
(defun lsp-assist-restart ()
  "Start lsp-assist's server again for this buffer's project.
Use it after the server exited (the mode line says error), or after
changing `lsp-assist-command' or the model: the running server, if any,
is shut down first."
  (interactive)
  (unless lsp-assist-mode
    (user-error "lsp-assist: this buffer is not in lsp-assist-mode (M-x lsp-assist-mode)"))
  (unless (lsp-assist--program-found-p)
    (user-error "%s" (lsp-assist--missing-message)))
  (let* ((server (lsp-assist--buffer-server))
         (project (or (and server (eglot--project server)) lsp-assist--project
                      (project-current)))
         (buffers (delete-dups (cons (current-buffer) (lsp-assist--project-buffers project)))))
    (when server
      (eglot-shutdown server))
    (setq lsp-assist--connecting
          (cl-remove project lsp-assist--connecting :key #'car :test #'equal))
    (dolist (buffer buffers)
      (with-current-buffer buffer
        (setq lsp-assist--exit nil
              lsp-assist--connect-error nil)))
    (force-mode-line-update t)
    (message "lsp-assist: restarting the server")
    ;; This buffer starts it; the others attach once it is up.
    (lsp-assist--connect (current-buffer))))

;;;; Server state (for the mode line)

(defvar lsp-assist--states (make-hash-table :test #'eq :weakness 'key)
  "Server -> plist (:ready :error :thinking :latency :progress :polling).")

(defun lsp-assist--state (server)
  "The state plist of SERVER."
  (gethash server lsp-assist--states))

(defun lsp-assist--set-state (server &rest pairs)
  "Set PAIRS (KEY VALUE ...) in SERVER's state and refresh the mode lines."
  (let ((state (gethash server lsp-assist--states)))
    (cl-loop for (key value) on pairs by #'cddr
             do (setq state (plist-put state key value)))
    (puthash server state lsp-assist--states))
  (force-mode-line-update t))

(defun lsp-assist--model-error (status)
  "The model error in the lspAssist.status result STATUS, or nil."
  (let ((err (plist-get (plist-get status :model) :error)))
    (and (stringp err) (not (string-empty-p err)) err)))

(defun lsp-assist--poll-status (server)
  "Ask SERVER for lspAssist.status until it is ready or failed."
  (unless (plist-get (lsp-assist--state server) :polling)
    (lsp-assist--set-state server :polling t)
    (lsp-assist--status-request server)))

(defun lsp-assist--status-request (server)
  "One lspAssist.status request to SERVER; poll again while it loads."
  (if (not (jsonrpc-running-p server))
      (lsp-assist--set-state server :polling nil)
    (let ((again (lambda ()
                   (run-with-timer lsp-assist-status-interval nil
                                   #'lsp-assist--status-request server))))
      (jsonrpc-async-request
       server :workspace/executeCommand '(:command "lspAssist.status" :arguments [])
       :success-fn
       (lambda (status)
         (let ((err (lsp-assist--model-error status))
               (ready (eq (plist-get status :ready) t)))
           (lsp-assist--set-state server :ready ready :error err
                                  :polling (not (or ready err)))
           (cond ((not (or ready err)) (funcall again))
                 (ready (lsp-assist--schedule-selected)))))
       ;; No status to be had: do not hold suggestions back waiting for one.
       :error-fn (lambda (_err) (lsp-assist--set-state server :polling nil :ready t))
       :timeout-fn (lambda () (funcall again))
       :timeout lsp-assist-request-timeout))))

(defun lsp-assist--schedule-selected ()
  "Schedule a suggestion for the selected window's buffer (the model became ready)."
  (with-current-buffer (window-buffer (selected-window))
    (when lsp-assist-mode
      (setq lsp-assist--last-key nil)
      (lsp-assist--schedule)
      (lsp-assist--schedule-cursor-report))))

(cl-defmethod eglot-handle-notification :before
  (server (_method (eql $/progress)) &key token value &allow-other-keys)
  "Record SERVER's work-done progress VALUE for TOKEN in the mode line."
  (when (lsp-assist--server-p server)
    (let* ((progress (copy-sequence (plist-get (lsp-assist--state server) :progress)))
           (kind (plist-get value :kind))
           (old (cdr (assoc token progress)))
           (entry (list :title (or (plist-get value :title) (plist-get old :title))
                        :message (or (plist-get value :message) (plist-get old :message))
                        :percentage (or (plist-get value :percentage)
                                        (plist-get old :percentage)))))
      (setq progress (cl-remove token progress :key #'car :test #'equal))
      (unless (equal kind "end")
        (push (cons token entry) progress))
      (lsp-assist--set-state server :progress progress)
      ;; The end of a model load: ask whether it is ready or failed.
      (when (equal kind "end")
        (lsp-assist--poll-status server)))))

(defun lsp-assist--loading-progress-p (entry)
  "Non-nil when progress ENTRY is about loading the model."
  (string-match-p "model\\|load" (or (plist-get entry :title) "")))

(defun lsp-assist--progress-string (entry)
  "Short mode-line text of progress ENTRY."
  (let ((title (replace-regexp-in-string
                "\\`lsp-assist: *" "" (or (plist-get entry :title) "working")))
        (pct (plist-get entry :percentage)))
    (if pct (format "%s %d%%" title pct) title)))

(defun lsp-assist-state ()
  "The current buffer's lsp-assist state: a symbol, and the details as a plist.
The symbol is one of starting, loading, ready, thinking, error, off."
  (let* ((server (lsp-assist--buffer-server))
         (state (and server (lsp-assist--state server)))
         (progress (mapcar #'cdr (plist-get state :progress)))
         (loading (cl-find-if #'lsp-assist--loading-progress-p progress))
         (err (cond ((and server (not (jsonrpc-running-p server))) "the server exited")
                    (server (plist-get state :error))
                    (lsp-assist--exit (lsp-assist--exit-message lsp-assist--exit))
                    (t lsp-assist--connect-error))))
    (list (cond (err 'error)
                ((null server) 'starting)
                ((> (or (plist-get state :thinking) 0) 0) 'thinking)
                ((or loading (not (plist-get state :ready))) 'loading)
                ((not (lsp-assist--auto-allowed-p)) 'off)
                (t 'ready))
          (list :error err :latency (plist-get state :latency)
                :progress (if loading (list loading)
                            (cl-remove-if #'lsp-assist--loading-progress-p progress))))))

(defun lsp-assist--mode-line ()
  "The mode-line text of `lsp-assist-mode'."
  (pcase-let* ((`(,state ,details) (lsp-assist-state))
               (latency (plist-get details :latency))
               (err (plist-get details :error))
               (progress (plist-get details :progress)))
    (concat
     " " lsp-assist-lighter
     (propertize (symbol-name state)
                 'face (if (eq state 'error) 'error nil)
                 'help-echo (or err "lsp-assist: M-x lsp-assist-status for details"))
     (when (and latency (memq state '(ready thinking off)))
       (format " %dms" (round latency)))
     (when (and (eq state 'error) lsp-assist--exit (not (lsp-assist--buffer-server)))
       (propertize (format ": %s" (lsp-assist--exit-reason lsp-assist--exit))
                   'face 'error 'help-echo err))
     (when progress
       (concat " " (mapconcat (lambda (entry)
                                (if (lsp-assist--loading-progress-p entry)
                                    ;; "loading" says the rest already.
                                    (format "%s%%" (or (plist-get entry :percentage) "?"))
                                  (lsp-assist--progress-string entry)))
                              progress " "))))))

(defun lsp-assist--mode-line-construct ()
  "`lsp-assist--mode-line' for the mode line: a % there starts a %-construct.
The text of an :eval is itself a mode-line construct, so \"60%\" would
draw as \"60\": each % is doubled."
  (replace-regexp-in-string "%" "%%" (lsp-assist--mode-line) t t))

;;;; Completion at point

(defun lsp-assist--report-acceptance (server item)
  "Run ITEM's command (lspAssist.accept) on SERVER; return the response."
  (when-let ((command (plist-get item :command)))
    (let ((name (plist-get command :command))
          (arguments (plist-get command :arguments)))
      (when name
        (jsonrpc-request server :workspace/executeCommand
                         `(:command ,name :arguments ,(or arguments []))
                         :timeout lsp-assist-request-timeout)))))

(defun lsp-assist-completion-at-point ()
  "Eglot's `completion-at-point', reporting accepted items to the server.
eglot 1.9 ignores a completion item's command; this runs lspAssist.accept."
  (when-let ((result (eglot-completion-at-point)))
    (let* ((props (nthcdr 3 result))
           (exit (plist-get props :exit-function))
           (server (eglot-current-server)))
      (append (cl-subseq result 0 3)
              (plist-put (copy-sequence props) :exit-function
                         (lambda (proxy status)
                           (when exit (funcall exit proxy status))
                           (when (memq status '(finished exact))
                             (let ((item (get-text-property 0 'eglot--lsp-item proxy)))
                               (when item
                                 (ignore-errors
                                   (lsp-assist--report-acceptance server item)))))))))))

;;;; Direct insertion

(defun lsp-assist--items (response)
  "The items of a completion or inline completion RESPONSE, as a list."
  (append (if (vectorp response) response (plist-get response :items)) nil))

(defun lsp-assist--request-items (server)
  "Ask SERVER for completions at point; return (RESPONSE . ITEMS)."
  (eglot--signal-textDocument/didChange)
  (let* ((response (jsonrpc-request server :textDocument/completion
                                    (eglot--CompletionParams)
                                    :timeout lsp-assist-request-timeout))
         (items (lsp-assist--items response)))
    (setq lsp-assist-last-response response)
    (cons response items)))

(defun lsp-assist--suggestion (items)
  "Return the lsp-assist item among ITEMS (the one with a textEdit), or nil."
  (cl-find-if (lambda (item) (plist-get item :textEdit)) items))

(defun lsp-assist--apply-item (server item)
  "Insert ITEM's textEdit, move point after it, report the acceptance.
Return the inserted text."
  (let* ((edit (plist-get item :textEdit))
         (range (or (plist-get edit :range) (plist-get edit :insert)))
         (text (plist-get edit :newText))
         (region (eglot--range-region range)))
    (delete-region (car region) (cdr region))
    (goto-char (car region))
    (insert text)
    (eglot--signal-textDocument/didChange)
    (lsp-assist--report-acceptance server item)
    text))

;;;###autoload
(defun lsp-assist-complete ()
  "Insert lsp-assist's suggestion at point (and report the acceptance)."
  (interactive)
  (let* ((server (lsp-assist--server))
         (item (lsp-assist--suggestion (cdr (lsp-assist--request-items server)))))
    (if item
        (lsp-assist--apply-item server item)
      (when (called-interactively-p 'interactive)
        (message "lsp-assist: no suggestion here"))
      nil)))

;;;; Suggestions: requests

(defvar-local lsp-assist--pending nil
  "(SERVER . ID) of the suggestion request in flight, or nil.")

(defvar-local lsp-assist--request-seq 0
  "Counts requests: an answer to an older one is dropped.")

(defun lsp-assist--inline-capable-p (server)
  "Non-nil when SERVER advertises textDocument/inlineCompletion."
  ;; Its options are often {}, which reads as nil: look for the key.
  (let ((caps (eglot--capabilities server)))
    (and (plist-member caps :inlineCompletionProvider)
         (not (eq (plist-get caps :inlineCompletionProvider) :json-false)))))

(defun lsp-assist--suggestion-from (item inline)
  "ITEM of an INLINE (else completion) answer as (:text :delete :item), or nil.
:text goes in at point; :delete counts characters after point it replaces."
  (let* ((edit (and (not inline) (plist-get item :textEdit)))
         (raw (if inline (plist-get item :insertText) (plist-get edit :newText)))
         (text (if (stringp raw) raw (plist-get raw :value)))
         (range (if inline (plist-get item :range)
                  (and edit (or (plist-get edit :range) (plist-get edit :insert))))))
    (when (and (stringp text) (or inline edit))
      (pcase-let ((`(,beg . ,end) (if range (eglot--range-region range)
                                    (cons (point) (point)))))
        ;; The item may start before point (with the word being typed): show the rest.
        (let ((typed (buffer-substring-no-properties (min beg (point)) (point))))
          (when (and (<= beg (point)) (string-prefix-p typed text))
            (let ((rest (substring text (length typed))))
              (unless (string-empty-p rest)
                (list :text rest :delete (max 0 (- end (point))) :item item)))))))))

(defun lsp-assist--async-request (server method params &rest args)
  "`jsonrpc-async-request' of METHOD with PARAMS to SERVER; return its id.
ARGS are its keywords.  jsonrpc's own returns nil (in every release up to
Emacs 30's), so a $/cancelRequest sent from its value named no request: the
server logged \"Cancel notification for unknown message id None\" at every
key.  The id is the connection's request counter, which jsonrpc increments
for each request it sends; nil if that cannot be read."
  (let ((before (ignore-errors (jsonrpc--next-request-id server))))
    (apply #'jsonrpc-async-request server method params args)
    (let ((after (ignore-errors (jsonrpc--next-request-id server))))
      (and (integerp after) (not (eql before after)) after))))

(defun lsp-assist--cancel-request (pending)
  "Send $/cancelRequest for PENDING, a (SERVER . ID) request, if it can be named."
  (when (and pending (integerp (cdr pending)) (jsonrpc-running-p (car pending)))
    (ignore-errors (jsonrpc-notify (car pending) :$/cancelRequest `(:id ,(cdr pending))))))

(defun lsp-assist--cancel-pending ()
  "Cancel the suggestion request in flight, if any."
  (when-let ((pending lsp-assist--pending))
    (setq lsp-assist--pending nil)
    (lsp-assist--cancel-request pending)))

(defun lsp-assist--thinking (server delta)
  "Add DELTA to SERVER's count of requests in flight."
  (lsp-assist--set-state server :thinking
                         (max 0 (+ delta (or (plist-get (lsp-assist--state server) :thinking) 0)))))

(defun lsp-assist--request (kind callback &optional refresh)
  "Ask for suggestions at point; KIND is `automatic' or `invoked'.
CALLBACK gets the list of suggestions (maybe empty) if the buffer and point are
unchanged when the answer comes.  REFRESH: asked again for a suggestion that
shows (lspAssist/suggestionReady); its latency is not the mode line's."
  (let* ((server (lsp-assist--server))
         (buffer (current-buffer))
         (key (lsp-assist--key))
         (inline (lsp-assist--inline-capable-p server))
         (method (if inline :textDocument/inlineCompletion :textDocument/completion))
         (seq (cl-incf lsp-assist--request-seq))
         (started (float-time))
         (done nil)
         params)
    (lsp-assist--cancel-pending)
    (eglot--signal-textDocument/didChange)
    (setq params (if inline
                     (append (eglot--TextDocumentPositionParams)
                             `(:context (:triggerKind ,(if (eq kind 'invoked) 1 2))))
                   (eglot--CompletionParams)))
    (setq lsp-assist-last-request (list :kind kind :method method :time started))
    (cl-flet ((finish (response)
                (unless done
                  (setq done t)
                  (lsp-assist--thinking server -1)
                  (when (buffer-live-p buffer)
                    (with-current-buffer buffer
                      (when (= seq lsp-assist--request-seq)
                        (setq lsp-assist--pending nil)
                        (cond ((eq response 'failed) (setq response nil))
                              (refresh)
                              (t (lsp-assist--set-state
                                  server :latency (* 1000 (- (float-time) started)))))
                        (setq lsp-assist-last-response response)
                        (cond
                         ((equal key (lsp-assist--key))
                          (funcall callback
                                   (cl-delete-duplicates
                                    (delq nil (mapcar (lambda (item)
                                                        (lsp-assist--suggestion-from item inline))
                                                      (lsp-assist--items response)))
                                    :key (lambda (s) (plist-get s :text))
                                    :test #'equal :from-end t)))
                         ;; A refresh overtaken by typing through the suggestion: its
                         ;; answer is for the place before; ask again where point is.
                         ((and refresh (lsp-assist--typing-through-p))
                          (lsp-assist--refresh)))))))))
      (let ((id (lsp-assist--async-request
                 server method params
                 :success-fn (lambda (response) (finish response))
                 :error-fn (lambda (_err) (finish 'failed))
                 :timeout-fn (lambda () (finish 'failed))
                 :timeout lsp-assist-request-timeout)))
        ;; Counted once sent: a send that fails leaves no request in flight.
        (lsp-assist--thinking server 1)
        (unless done
          (setq lsp-assist--pending (cons server id)))))))

;;;; Suggestions: the preview after point

(defvar-local lsp-assist--overlay nil)

(defvar-local lsp-assist--shown-item nil
  "The item last reported shown: redrawing its rest is not a new show.")

(defun lsp-assist--utf16-length (text)
  "TEXT's length in UTF-16 code units (what Copilot's acceptedLength counts)."
  (/ (length (encode-coding-string text 'utf-16le)) 2))

(defun lsp-assist--item-text (item)
  "The text ITEM inserts (its insertText, or its textEdit's newText)."
  (let ((raw (or (plist-get item :insertText)
                 (plist-get (plist-get item :textEdit) :newText))))
    (if (stringp raw) raw (or (plist-get raw :value) ""))))

(defun lsp-assist--tell (method item params)
  "Notify the buffer's server of METHOD with PARAMS about ITEM (telemetry)."
  (let ((server (lsp-assist--buffer-server))
        (arguments (plist-get (plist-get item :command) :arguments)))
    (when (and server (> (length arguments) 0) (jsonrpc-running-p server))
      (push (list :method (substring (symbol-name method) 1) :item (elt arguments 0)
                  :accepted-length (plist-get params :acceptedLength))
            lsp-assist-telemetry)
      (setq lsp-assist-telemetry (seq-take lsp-assist-telemetry 50))
      (ignore-errors (jsonrpc-notify server method params)))))

(defvar-local lsp-assist--preview nil
  "The suggestion shown: plist (:text :delete :item :key :reported).")

(defvar-local lsp-assist--typed-through nil
  "`lsp-assist--key' after the whole suggestion shown was typed through, or nil.")

(defvar-local lsp-assist--choices nil
  "Suggestions of the last answer, and which one shows: (INDEX . LIST).")

(defvar-local lsp-assist--choices-invoked nil
  "Non-nil when `lsp-assist--choices' came from an explicit request.")

(defvar-local lsp-assist--preview-active nil
  "Non-nil while a suggestion shows: `lsp-assist-preview-map' is then active.")

(defvar lsp-assist-preview-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "TAB") #'lsp-assist-accept)
    (define-key map (kbd "<tab>") #'lsp-assist-accept)
    (define-key map (kbd "M-f") #'lsp-assist-accept-word)
    (define-key map (kbd "M-<right>") #'lsp-assist-accept-word)
    (define-key map (kbd "C-e") #'lsp-assist-accept-line)
    (define-key map (kbd "C-M-<right>") #'lsp-assist-accept-line)
    ;; Cycling: M-n and M-p, the same in a terminal and a graphical frame.  No M-[
    ;; (copilot.vim's): in a terminal ESC [ begins the escape sequences of arrow and
    ;; function keys, so Emacs waits for the rest and the key after M-[ is lost
    ;; ("M-[ a is undefined"); a binding would also take M-<right> for M-[ "1;3C".
    (define-key map (kbd "M-n") #'lsp-assist-next)
    (define-key map (kbd "M-p") #'lsp-assist-previous)
    (define-key map (kbd "M-]") #'lsp-assist-next)
    (define-key map (kbd "C-g") #'lsp-assist-dismiss)
    (define-key map (kbd "C-]") #'lsp-assist-dismiss)
    map)
  "Keys active while a suggestion shows after point (and only then).
A zero-width overlay's own keymap never applies, so this map is an emulation
map: it takes precedence over minor-mode maps while the preview shows.")

(defvar lsp-assist--emulation-alist
  `((lsp-assist--preview-active . ,lsp-assist-preview-map)))

(add-to-list 'emulation-mode-map-alists 'lsp-assist--emulation-alist)

(defun lsp-assist--key ()
  "What a suggestion depends on: point and the buffer's text."
  (cons (point) (buffer-chars-modified-tick)))

(defun lsp-assist--clear-preview ()
  "Remove the suggestion shown after point."
  (when lsp-assist--overlay
    (delete-overlay lsp-assist--overlay))
  (setq lsp-assist--overlay nil
        lsp-assist--preview nil
        lsp-assist--preview-active nil))

(defun lsp-assist--show (suggestion)
  "Show SUGGESTION's text after point."
  (lsp-assist--clear-preview)
  (let ((text (plist-get suggestion :text))
        (ov (make-overlay (point) (point) nil t nil)))
    ;; The cursor stays before the grey text: on its first character, which the
    ;; `cursor' property marks.  A newline cannot hold the cursor (Emacs then draws it
    ;; after the whole string, at the end of the last grey line), so a suggestion that
    ;; starts a new line gets a blank before it, at point, to hold the cursor.
    (overlay-put ov 'after-string
                 (if (string-prefix-p "\n" text)
                     (concat (propertize " " 'cursor t)
                             (propertize text 'face 'lsp-assist-preview-face))
                   (concat (propertize (substring text 0 1) 'face 'lsp-assist-preview-face
                                       'cursor t)
                           (propertize (substring text 1) 'face 'lsp-assist-preview-face))))
    (overlay-put ov 'priority 1000)
    (overlay-put ov 'lsp-assist t)
    (setq lsp-assist--overlay ov
          lsp-assist--preview (plist-put (copy-sequence suggestion) :key (lsp-assist--key))
          lsp-assist--preview-active t)
    (let ((item (plist-get suggestion :item)))
      (unless (eq item lsp-assist--shown-item)
        (setq lsp-assist--shown-item item)
        (lsp-assist--tell :textDocument/didShowCompletion item (list :item item))))))

(defun lsp-assist-preview-text ()
  "The suggestion shown after point, or nil."
  (plist-get lsp-assist--preview :text))

(defun lsp-assist--show-choices (suggestions &optional invoked quiet)
  "Keep SUGGESTIONS as the choices and show the first.
INVOKED marks an explicit request; QUIET says nothing when there is none."
  (setq lsp-assist--choices (and suggestions (cons 0 suggestions))
        lsp-assist--choices-invoked invoked)
  (if suggestions
      (lsp-assist--show (car suggestions))
    (lsp-assist--clear-preview)
    (unless quiet (message "lsp-assist: no suggestion here"))))

(defun lsp-assist--insert-part (part)
  "Insert PART of the suggestion shown; keep showing the rest.
Report a part taken (textDocument/didPartiallyAcceptCompletion, the length from
the start of the item's text), and the acceptance (the item's command) once all
of it is in."
  (let* ((preview lsp-assist--preview)
         (text (plist-get preview :text))
         (rest (substring text (length part)))
         (item (plist-get preview :item))
         (server (lsp-assist--buffer-server)))
    (lsp-assist--clear-preview)
    (insert part)
    (if (string-empty-p rest)
        (delete-region (point) (min (point-max) (+ (point) (plist-get preview :delete))))
      (lsp-assist--show (list :text rest :delete (plist-get preview :delete) :item item))
      ;; The other choices were for the old point: cycling from here asks again.
      (setq lsp-assist--choices (list 0 lsp-assist--preview)
            lsp-assist--choices-invoked nil)
      ;; No new request for the point this command moved to: the rest shows.
      (setq lsp-assist--last-key (lsp-assist--key)))
    ;; The server measures what is kept of the text accepted: it must have it first
    ;; (eglot would send it after `eglot-send-changes-idle-time').
    (when (and server item) (eglot--signal-textDocument/didChange))
    (cond ((not (and server item)))
          ((string-empty-p rest) (lsp-assist--report-acceptance-async server item))
          (t (let ((full (lsp-assist--item-text item)))
               (lsp-assist--tell :textDocument/didPartiallyAcceptCompletion item
                                 (list :item item
                                       :acceptedLength (- (lsp-assist--utf16-length full)
                                                          (lsp-assist--utf16-length rest)))))))))

(defun lsp-assist--report-acceptance-async (server item)
  "Run ITEM's command on SERVER without waiting for the answer."
  (when-let ((command (plist-get item :command)))
    (jsonrpc-async-request server :workspace/executeCommand
                           `(:command ,(plist-get command :command)
                                      :arguments ,(or (plist-get command :arguments) []))
                           :success-fn (lambda (answer) (setq lsp-assist-last-acceptance answer))
                           :error-fn #'ignore :timeout-fn #'ignore)))

(defun lsp-assist--next-word (text)
  "The first word of TEXT: blanks, then a run of word characters or of punctuation."
  (if (string-match "\\`[ \t\n]*\\(?:\\(?:\\sw\\|\\s_\\)+\\|[^ \t\n[:alnum:]_]+\\)?" text)
      (let ((word (match-string 0 text)))
        (if (string-empty-p word) text word))
    text))

(defun lsp-assist--next-line (text)
  "The first line of TEXT without its newline (a leading newline comes along)."
  (if (string-match "\\`\n?[^\n]*" text) (match-string 0 text) text))

(defun lsp-assist--preview-or-error ()
  "Signal a user error unless a suggestion shows."
  (unless lsp-assist--preview
    (user-error "lsp-assist: no suggestion shows")))

(defun lsp-assist-accept ()
  "Insert the whole suggestion shown after point."
  (interactive)
  (lsp-assist--preview-or-error)
  (lsp-assist--insert-part (plist-get lsp-assist--preview :text)))

(defun lsp-assist-accept-word ()
  "Insert the next word of the suggestion shown after point."
  (interactive)
  (lsp-assist--preview-or-error)
  (lsp-assist--insert-part (lsp-assist--next-word (plist-get lsp-assist--preview :text))))

(defun lsp-assist-accept-line ()
  "Insert the rest of the line of the suggestion shown after point."
  (interactive)
  (lsp-assist--preview-or-error)
  (lsp-assist--insert-part (lsp-assist--next-line (plist-get lsp-assist--preview :text))))

(defun lsp-assist-dismiss ()
  "Remove the suggestion shown; none comes back until point or the text changes.
The server hears of it (lspAssist/didDismissCompletion)."
  (interactive)
  (when-let ((item (plist-get lsp-assist--preview :item)))
    (lsp-assist--tell :lspAssist/didDismissCompletion item
                      (list :item (list :command (plist-get item :command)))))
  (lsp-assist--cancel-pending)
  (setq lsp-assist--typed-through nil)
  (lsp-assist--clear-preview))

(defun lsp-assist--cycle (step)
  "Show the suggestion STEP places away among the choices.
With a single choice from an automatic request, ask explicitly for more first."
  (let ((choices lsp-assist--choices))
    (if (and choices (or lsp-assist--choices-invoked (> (length (cdr choices)) 1)))
        (let* ((n (length (cdr choices)))
               (index (mod (+ (car choices) step) n)))
          (setcar choices index)
          (lsp-assist--show (nth index (cdr choices)))
          (message "lsp-assist: suggestion %d/%d" (1+ index) n))
      (let ((current (lsp-assist-preview-text)))
        (lsp-assist--request
         'invoked
         (lambda (suggestions)
           (lsp-assist--show-choices suggestions t)
           (when suggestions
             (let ((at (or (cl-position current suggestions
                                        :key (lambda (s) (plist-get s :text)) :test #'equal)
                           -1)))
               (if (and (>= at 0) (= (length suggestions) 1))
                   (message "lsp-assist: suggestion 1/1 (the server offered no other)")
                 (setcar lsp-assist--choices (if (>= at 0) at (- step)))
                 (lsp-assist--cycle step))))))))))

(defun lsp-assist-next ()
  "Show the next suggestion (asking the server for alternatives if needed)."
  (interactive)
  (lsp-assist--cycle 1))

(defun lsp-assist-previous ()
  "Show the previous suggestion (asking the server for alternatives if needed)."
  (interactive)
  (lsp-assist--cycle -1))

;;;###autoload
(defun lsp-assist-suggest ()
  "Ask for a suggestion at point now and show it after point."
  (interactive)
  (lsp-assist--request 'invoked (lambda (suggestions) (lsp-assist--show-choices suggestions t))))

;;;; Suggestions: when to ask

(defvar-local lsp-assist--timer nil)
(defvar-local lsp-assist--last-key nil
  "`lsp-assist--key' when a request was last scheduled.")
(defvar lsp-assist--last-buffer nil
  "The buffer of the last command, to notice entering another one.")

(defun lsp-assist--auto-allowed-p ()
  "Non-nil when suggestions may show by themselves in this buffer."
  (and lsp-assist-enabled
       (not (apply #'derived-mode-p lsp-assist-disabled-modes))))

(defun lsp-assist--type-through ()
  "If the command typed the start of the suggestion, show the rest; non-nil if so."
  (let* ((preview lsp-assist--preview)
         (start (car (plist-get preview :key)))
         (text (plist-get preview :text)))
    (when (and start (> (point) start) (<= (point) (+ start (length text)))
               (equal (buffer-substring-no-properties start (point))
                      (substring text 0 (- (point) start))))
      (let ((rest (substring text (- (point) start))))
        (if (string-empty-p rest)
            (progn (lsp-assist--clear-preview)
                   ;; All of a suggestion's start typed: its whole may still come.
                   (setq lsp-assist--typed-through (lsp-assist--key)))
          (lsp-assist--show (plist-put (copy-sequence preview) :text rest))))
      (setq lsp-assist--last-key (lsp-assist--key))
      t)))

(defun lsp-assist--post-command ()
  "After each command: update or remove the preview, schedule a request.
A global hook, so that leaving a buffer removes its preview and entering one
asks for a suggestion there."
  (let ((buffer (current-buffer)))
    (unless (eq buffer lsp-assist--last-buffer)
      (when (buffer-live-p lsp-assist--last-buffer)
        (with-current-buffer lsp-assist--last-buffer
          (when lsp-assist--preview (lsp-assist--clear-preview))
          (setq lsp-assist--last-key nil)))
      (setq lsp-assist--last-buffer buffer))
    (when lsp-assist-mode
      (let ((key (lsp-assist--key)))
        (when (and lsp-assist--preview
                   (not (equal key (plist-get lsp-assist--preview :key))))
          (unless (lsp-assist--type-through)
            (lsp-assist--clear-preview)))
        (unless (equal key lsp-assist--last-key)
          ;; Point moved without an edit, or the buffer was entered: say where it
          ;; rests.  After an edit the request says it.
          (if (or (null lsp-assist--last-key) (eql (cdr key) (cdr lsp-assist--last-key)))
              (lsp-assist--schedule-cursor-report)
            (when (timerp lsp-assist--cursor-timer)
              (cancel-timer lsp-assist--cursor-timer)))
          (setq lsp-assist--last-key key)
          (lsp-assist--schedule))))))

(defvar lsp-assist--cursor-timer nil)
(defvar lsp-assist--last-report nil
  "(SERVER BUFFER . KEY) of the last lspAssist/didMoveCursor sent.")
(defvar lsp-assist-cursor-reports nil
  "The cursor positions reported, newest first (the last 50).
Each is a plist (:line :character).")

(defun lsp-assist--schedule-cursor-report ()
  "Report point once it has rested `lsp-assist-report-cursor-delay' seconds."
  (when (timerp lsp-assist--cursor-timer)
    (cancel-timer lsp-assist--cursor-timer))
  (setq lsp-assist--cursor-timer
        (and (numberp lsp-assist-report-cursor-delay)
             (run-with-timer lsp-assist-report-cursor-delay nil
                             #'lsp-assist--report-cursor (current-buffer)))))

(defun lsp-assist--report-cursor (buffer)
  "Tell BUFFER's server where point rests (lspAssist/didMoveCursor).
Once per place."
  (when (and (buffer-live-p buffer) (eq buffer (window-buffer (selected-window))))
    (with-current-buffer buffer
      (let ((server (lsp-assist--buffer-server)))
        (when (and lsp-assist-mode server (jsonrpc-running-p server)
                   (memq (car (lsp-assist-state)) '(ready thinking))
                   (not (equal lsp-assist--last-report
                               (cons server (cons buffer (lsp-assist--key))))))
          (setq lsp-assist--last-report (cons server (cons buffer (lsp-assist--key))))
          (eglot--signal-textDocument/didChange)
          (let ((params (eglot--TextDocumentPositionParams)))
            (push (plist-get params :position) lsp-assist-cursor-reports)
            (setq lsp-assist-cursor-reports (seq-take lsp-assist-cursor-reports 50))
            (ignore-errors (jsonrpc-notify server :lspAssist/didMoveCursor params))))))))

(defun lsp-assist--schedule ()
  "Ask for a suggestion `lsp-assist-debounce-ms' after this command.
A timer, not idle time: the next command restarts it."
  (when (timerp lsp-assist--timer)
    (cancel-timer lsp-assist--timer))
  (setq lsp-assist--timer nil)
  (when (and (lsp-assist--auto-allowed-p) (not lsp-assist--preview))
    (setq lsp-assist--timer
          (run-with-timer (lsp-assist--debounce-seconds) nil #'lsp-assist--auto-request
                          (current-buffer) (lsp-assist--key)))))

(defun lsp-assist--model-ready-p ()
  "Non-nil when the buffer's server has its model loaded (a request may be out).
While the model loads the answer is empty: ask once it is ready."
  (let* ((server (lsp-assist--buffer-server))
         (state (and server (lsp-assist--state server))))
    (and server (jsonrpc-running-p server)
         (plist-get state :ready) (not (plist-get state :error))
         (not (cl-find-if #'lsp-assist--loading-progress-p
                          (mapcar #'cdr (plist-get state :progress)))))))

(defun lsp-assist--auto-request (buffer key)
  "Ask for a suggestion in BUFFER if it is selected and still at KEY."
  (when (and (buffer-live-p buffer) (eq buffer (window-buffer (selected-window))))
    (with-current-buffer buffer
      (when (and lsp-assist-mode (lsp-assist--auto-allowed-p) (not lsp-assist--preview)
                 (equal key (lsp-assist--key)) (not (minibufferp)) (not (region-active-p))
                 ;; Ready, also while an older request is out (the mode line says
                 ;; thinking): this one cancels it.  Waiting for `ready' skipped
                 ;; the keys that came while a request was out.
                 (lsp-assist--model-ready-p))
        (lsp-assist--request 'automatic
                             (lambda (suggestions) (lsp-assist--show-choices suggestions nil t)))))))

;;;; Early answers: lspAssist/suggestionReady

(defconst lsp-assist--ready-capability :lspAssistSuggestionReady
  "The experimental client capability that asks for lspAssist/suggestionReady.")

(defvar lsp-assist-ready-notices nil
  "The lspAssist/suggestionReady notices received, newest first (at most 50).
Each is a plist (:uri :version :position :action); :action is \"refresh\" or
why the notice was ignored.")

(defvar lsp-assist-refreshes nil
  "The answers to the requests those notices made, newest first (at most 50).
Each is a plist (:before :after :same): the text shown before, the answer's
text, and whether they were the same (then nothing is redrawn).")

(defun lsp-assist--own-connection-p (server)
  "Non-nil when eglot started SERVER from lsp-assist's contact.
Known before `initialize' (unlike the server's capabilities)."
  (eq (plist-get (ignore-errors (eglot--saved-initargs server)) :initializationOptions)
      #'lsp-assist--initialization-options))

(defun lsp-assist--with-ready-capability (capabilities)
  "CAPABILITIES (eglot's plist) with lspAssistSuggestionReady in :experimental."
  (let* ((experimental (plist-get capabilities :experimental))
         (pairs (cond ((hash-table-p experimental)
                       (let (plist)
                         (maphash (lambda (key value)
                                    (setq plist (plist-put plist (if (keywordp key) key
                                                                   (intern (format ":%s" key)))
                                                           value)))
                                  experimental)
                         plist))
                      ((consp experimental) (copy-sequence experimental)))))
    (plist-put (copy-sequence capabilities) :experimental
               (plist-put pairs lsp-assist--ready-capability t))))

(cl-defmethod eglot-client-capabilities :around (server)
  "Eglot's capabilities for SERVER, with lspAssistSuggestionReady for lsp-assist."
  (let ((capabilities (cl-call-next-method)))
    (if (lsp-assist--own-connection-p server)
        (lsp-assist--with-ready-capability capabilities)
      capabilities)))

(defun lsp-assist--ready-ignored (server uri position)
  "Why a notice from SERVER for URI at POSITION is not acted on here, or nil."
  (let ((shown (and lsp-assist--preview
                    (equal (plist-get lsp-assist--preview :key) (lsp-assist--key)))))
    (cond ((not (and (stringp uri) (integerp (plist-get position :line))
                     (integerp (plist-get position :character))))
           "malformed")
          ((not (and buffer-file-name
                     (equal uri (plist-get (eglot--TextDocumentIdentifier) :uri))))
           "not the current buffer")
          ((not (eq (lsp-assist--buffer-server) server)) "not attached")
          ((not (and lsp-assist-mode (lsp-assist--auto-allowed-p))) "disabled")
          (lsp-assist--pending "a request is in flight")
          ((not (or shown (equal lsp-assist--typed-through (lsp-assist--key))))
           "no suggestion shown")
          ;; The request was made here, or before point on the way typed since.
          ((> (eglot--lsp-position-to-point position) (point)) "another place"))))

(defun lsp-assist--typing-through-p ()
  "Non-nil when point is where typing through the suggestion left it."
  (let ((key (lsp-assist--key)))
    (or (equal lsp-assist--typed-through key)
        (and lsp-assist--preview (equal (plist-get lsp-assist--preview :key) key)))))

(defun lsp-assist--refresh ()
  "Ask again at point (Automatic); show the answer in place of what shows.
An empty answer clears it: the server's whole suggestion there is nothing."
  (let ((shown (lsp-assist-preview-text)))
    (lsp-assist--request
     'automatic
     (lambda (suggestions)
       (let* ((now (lsp-assist-preview-text))
              (text (plist-get (car suggestions) :text))
              (same (equal text now)))
         (push (list :before shown :after text :same same) lsp-assist-refreshes)
         (setq lsp-assist-refreshes (seq-take lsp-assist-refreshes 50))
         (cond
          ;; The same text: leave the preview as it is (no redraw).
          ((and text (not same))
           (setq lsp-assist--typed-through nil)
           (lsp-assist--show-choices suggestions nil t))
          ;; An answer with nothing (not a failed request): the server's whole is
          ;; nothing here, it dropped the start that shows (a copy of the line below).
          ((and (null suggestions) lsp-assist-last-response)
           (setq lsp-assist--typed-through nil)
           (lsp-assist--clear-preview)))))
     t)))

(cl-defmethod eglot-handle-notification
  (server (_method (eql lspAssist/suggestionReady)) &key textDocument position
          &allow-other-keys)
  "SERVER has the whole suggestion asked for at POSITION in TEXTDOCUMENT.
If the start of it still shows in the selected window's buffer, ask again there."
  (with-current-buffer (window-buffer (selected-window))
    (let* ((uri (plist-get textDocument :uri))
           (reason (lsp-assist--ready-ignored server uri position)))
      (push (list :uri uri :version (plist-get textDocument :version) :position position
                  :action (or reason "refresh"))
            lsp-assist-ready-notices)
      (setq lsp-assist-ready-notices (seq-take lsp-assist-ready-notices 50))
      (unless reason
        (lsp-assist--refresh)))))

;;;; The minor modes

(defvar lsp-assist-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c \\") #'lsp-assist-suggest)
    map)
  "Keymap of `lsp-assist-mode'.
C-c \\ asks for a suggestion.  M-\\ (copilot.vim's key) stays
`delete-horizontal-space'; to use it, bind it here:
  (define-key lsp-assist-mode-map (kbd \"M-\\\\\") #\\='lsp-assist-suggest)")

;;;###autoload
(define-minor-mode lsp-assist-mode
  "AI suggestions from lsp-assist, shown after point.
Starts eglot with lsp-assist for this buffer.  A suggestion is asked for
`lsp-assist-debounce-ms' after each key or move.
While one shows (`lsp-assist-preview-map'):
\\<lsp-assist-preview-map>\\[lsp-assist-accept] inserts it, \\[lsp-assist-accept-word] a word, \\[lsp-assist-accept-line] a line,
\\[lsp-assist-next] and \\[lsp-assist-previous] cycle, \\[lsp-assist-dismiss] dismisses it.
\\<lsp-assist-mode-map>\\[lsp-assist-suggest] asks for one now.

\\{lsp-assist-mode-map}"
  :lighter (:eval (lsp-assist--mode-line-construct))
  :keymap lsp-assist-mode-map
  (cond
   ((not lsp-assist-mode)
    (lsp-assist--turn-off))
   ((not (lsp-assist--program-found-p))
    (lsp-assist--warn-missing)
    (setq lsp-assist-mode nil)
    (lsp-assist--turn-off))
   (t
    (unless (lsp-assist--registered-p) (lsp-assist-setup))
    (add-hook 'post-command-hook #'lsp-assist--post-command)
    (add-hook 'kill-buffer-hook #'lsp-assist--turn-off nil t)
    (setq lsp-assist--last-key nil)
    (if (lsp-assist--buffer-server)
        (lsp-assist--schedule)
      (run-with-timer 0 nil #'lsp-assist--connect (current-buffer))))))

(defun lsp-assist--turn-off ()
  "Remove lsp-assist's hooks, timer, request and preview from this buffer."
  (remove-hook 'kill-buffer-hook #'lsp-assist--turn-off t)
  (when (timerp lsp-assist--timer) (cancel-timer lsp-assist--timer))
  (setq lsp-assist--timer nil)
  (lsp-assist--cancel-pending)
  (lsp-assist--clear-preview))

(defun lsp-assist--mode-p (mode)
  "Non-nil when major MODE is one of `lsp-assist-modes'."
  (cl-some (lambda (spec)
             (let ((modes (if (consp spec) (car spec) spec)))
               (memq mode (if (listp modes) modes (list modes)))))
           lsp-assist-modes))

(defun lsp-assist--maybe-turn-on ()
  "Turn on `lsp-assist-mode' in file buffers of `lsp-assist-modes'."
  (when (and buffer-file-name (lsp-assist--mode-p major-mode))
    (lsp-assist-mode 1)))

;;;###autoload
(define-globalized-minor-mode global-lsp-assist-mode lsp-assist-mode
  lsp-assist--maybe-turn-on)

(define-obsolete-function-alias 'lsp-assist-preview-mode #'lsp-assist-mode "0.2.0")
(define-obsolete-function-alias 'lsp-assist-accept-preview #'lsp-assist-accept "0.2.0")

;;;; Enable and disable

(defun lsp-assist--clear-previews (pred)
  "Remove the preview in every buffer where PRED (no arguments) holds."
  (dolist (buffer (buffer-list))
    (with-current-buffer buffer
      (when (and lsp-assist--preview (funcall pred))
        (lsp-assist--clear-preview))))
  (force-mode-line-update t))

;;;###autoload
(defun lsp-assist-disable ()
  "Stop showing suggestions by themselves, in every buffer.
\\[lsp-assist-suggest] still asks for one."
  (interactive)
  (setq lsp-assist-enabled nil)
  (lsp-assist--clear-previews #'always)
  (message "lsp-assist: automatic suggestions off"))

;;;###autoload
(defun lsp-assist-enable ()
  "Show suggestions by themselves again (in major modes not disabled)."
  (interactive)
  (setq lsp-assist-enabled t)
  (force-mode-line-update t)
  (message "lsp-assist: automatic suggestions on"))

(defun lsp-assist--read-major-mode (prompt)
  "Read a major mode with PROMPT; the current one is the default."
  (intern (completing-read
           (format "%s (default %s): " prompt major-mode)
           (mapcar (lambda (spec) (symbol-name (if (consp spec) (car spec) spec)))
                   lsp-assist-modes)
           nil nil nil nil (symbol-name major-mode))))

;;;###autoload
(defun lsp-assist-disable-in-major-mode (mode)
  "Stop automatic suggestions in buffers of major MODE (and modes derived from it)."
  (interactive (list (lsp-assist--read-major-mode "Disable lsp-assist suggestions in")))
  (cl-pushnew mode lsp-assist-disabled-modes)
  (lsp-assist--clear-previews (lambda () (derived-mode-p mode)))
  (message "lsp-assist: automatic suggestions off in %s" mode))

;;;###autoload
(defun lsp-assist-enable-in-major-mode (mode)
  "Show automatic suggestions in buffers of major MODE again."
  (interactive (list (lsp-assist--read-major-mode "Enable lsp-assist suggestions in")))
  (setq lsp-assist-disabled-modes (delq mode lsp-assist-disabled-modes))
  (force-mode-line-update t)
  (message "lsp-assist: automatic suggestions on in %s" mode))

;;;; Settings

(defun lsp-assist-set-settings (settings)
  "Merge the plist SETTINGS into `lsp-assist-settings' and send them to the server.
The server receives workspace/didChangeConfiguration with {\"lspAssist\": {...}}."
  (cl-loop for (key value) on settings by #'cddr
           do (setq lsp-assist-settings (plist-put lsp-assist-settings key value)))
  (dolist (servers (hash-table-values eglot--servers-by-project))
    (dolist (server servers)
      (when (lsp-assist--server-p server)
        (jsonrpc-notify server :workspace/didChangeConfiguration
                        `(:settings (:lspAssist ,(lsp-assist--initialization-options))))
        ;; A new model may load now.
        (lsp-assist--set-state server :ready nil :error nil)
        (lsp-assist--poll-status server)))))

;;;; Explain, status, doctor

(defun lsp-assist--execute (command arguments)
  "Run COMMAND with the vector ARGUMENTS on the current lsp-assist server."
  (jsonrpc-request (lsp-assist--server) :workspace/executeCommand
                   `(:command ,command :arguments ,arguments)
                   :timeout lsp-assist-request-timeout))

(defun lsp-assist--show-text (buffer-name text)
  "Show TEXT in a read-only BUFFER-NAME."
  (with-current-buffer (get-buffer-create buffer-name)
    (let ((inhibit-read-only t))
      (erase-buffer)
      (insert text)
      (goto-char (point-min)))
    (special-mode)
    (display-buffer (current-buffer))
    (current-buffer)))

(defun lsp-assist-explain-context-text ()
  "Return the server's explanation of the context it builds at point.
A command the server refuses (a JSON-RPC error) gives \"error: \" and its message."
  (let ((position (eglot--pos-to-lsp-position)))
    (condition-case err
        (let ((result (lsp-assist--execute
                       "lspAssist.explainContext"
                       (vector (eglot--path-to-uri (buffer-file-name))
                               (plist-get position :line)
                               (plist-get position :character)))))
          (cond ((stringp result) result)
                ((stringp (plist-get result :text)) (plist-get result :text))
                (t (format "%S" result))))
      (jsonrpc-error
       (format "error: %s" (or (alist-get 'jsonrpc-error-message (cdr err)) (cdr err)))))))

;;;###autoload
(defun lsp-assist-explain-context ()
  "Show the prompt lsp-assist builds at point, layer by layer."
  (interactive)
  (lsp-assist--show-text "*lsp-assist explain*" (lsp-assist-explain-context-text)))

;;;###autoload
(defun lsp-assist-status ()
  "Show the lsp-assist server's status (and what the mode line is based on)."
  (interactive)
  (let ((state (lsp-assist-state))
        (result (lsp-assist--execute "lspAssist.status" [])))
    (lsp-assist--show-text
     "*lsp-assist status*"
     (concat (format "state: %s %S\nlast request: %S\n\n"
                     (car state) (cadr state) lsp-assist-last-request)
             (with-temp-buffer
               (insert (jsonrpc--json-encode result))
               (require 'json)
               (ignore-errors (json-pretty-print-buffer))
               (buffer-string))))))

(defun lsp-assist--setting-args ()
  "`lsp-assist-settings' as `--setting KEY=VALUE' arguments."
  (cl-loop for (key value) on lsp-assist-settings by #'cddr
           append (list "--setting"
                        (format "%s=%s" (substring (symbol-name key) 1)
                                (cond ((eq value t) "true")
                                      ((memq value '(nil :json-false)) "false")
                                      (t value))))))

(defun lsp-assist--append (buffer text)
  "Append TEXT to the read-only BUFFER; its windows follow the end."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (goto-char (point-max))
        (insert text))
      (dolist (window (get-buffer-window-list buffer nil t))
        (set-window-point window (point-max))))))

;;;###autoload
(defun lsp-assist-doctor ()
  "Run `lsp-assist doctor' for this project into *lsp-assist doctor*.
It checks the Python, llama.cpp build, model, grammars and caches."
  (interactive)
  (unless (lsp-assist--program-found-p)
    (user-error "%s" (lsp-assist--missing-message)))
  (let* ((server (lsp-assist--buffer-server))
         (project (if server (eglot--project server) (project-current)))
         (root (directory-file-name
                (expand-file-name (if project (project-root project) default-directory))))
         (command (append (list (car lsp-assist-command) "doctor")
                          (list "--workspace" root)
                          (lsp-assist--setting-args)))
         (buffer (get-buffer-create "*lsp-assist doctor*")))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert "$ " (combine-and-quote-strings command) "\n\n"))
      (special-mode))
    (make-process
     :name "lsp-assist-doctor" :buffer buffer :command command :noquery t
     :connection-type 'pipe
     :filter (lambda (proc output) (lsp-assist--append (process-buffer proc) output))
     :sentinel (lambda (proc _event)
                 (when (memq (process-status proc) '(exit signal))
                   (lsp-assist--append
                    (process-buffer proc)
                    (format "\n[lsp-assist doctor exited with code %d]\n"
                            (process-exit-status proc))))))
    (display-buffer buffer)
    buffer))

(provide 'lsp-assist)

;; Next edits (TAB jumps to the one shown, TAB again applies it): their own file.
(require 'lsp-assist-next-edit)
;;; lsp-assist.el ends here
