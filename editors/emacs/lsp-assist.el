;;; lsp-assist.el --- Local AI code completions from lsp-assist through eglot  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: convenience, languages, tools
;; SPDX-License-Identifier: Apache-2.0

;;; Commentary:

;; Registers `lsp-assist serve' (a language server that runs a GGUF model in its own
;; process) with eglot for Python, JavaScript/TypeScript, Go, Rust, Java, C and C++.
;;
;;   (add-to-list 'load-path "/path/to/lsp-assist/editors/emacs")
;;   (require 'lsp-assist)
;;   (setq lsp-assist-settings '(:contextBudget 1024 :draft "prompt-lookup"))
;;   (lsp-assist-setup)                 ; register with eglot
;;   (add-hook 'python-mode-hook #'eglot-ensure)
;;
;; No eglot release speaks textDocument/inlineCompletion, so the suggestion arrives
;; through the server's completion fallback: one item labelled "✨ ..." whose textEdit
;; inserts the suggestion at point.
;;
;; - `completion-at-point' (M-TAB, company, corfu) lists it; choosing it inserts the
;;   text and reports the acceptance to the server (eglot 1.9 does not run a completion
;;   item's command itself, so `lsp-assist-completion-at-point' wraps eglot's).
;; - `lsp-assist-complete' inserts the suggestion at point directly.
;; - `lsp-assist-preview-mode' shows it as grey text after point when you pause
;;   typing; TAB accepts it, any other command dismisses it.
;; - `lsp-assist-explain-context' shows the prompt the server builds at point, layer by
;;   layer; `lsp-assist-status' shows the server's status.
;;
;; Eglot runs one server per major mode: for the modes listed in `lsp-assist-modes'
;; lsp-assist replaces any other server eglot would start (pylsp, gopls ...).  The
;; server picks the language from the file name, so one process (one model in
;; memory) serves every language.

;;; Code:

(require 'cl-lib)
(require 'eglot)
(require 'jsonrpc)
(require 'subr-x)

(defgroup lsp-assist nil
  "Local AI code completions from the lsp-assist language server."
  :group 'tools
  :prefix "lsp-assist-")

(defcustom lsp-assist-command '("lsp-assist" "serve")
  "Command that starts the server on stdio: the program, then its arguments."
  :type '(repeat string))

(defcustom lsp-assist-settings nil
  "Server settings as a plist of flat camelCase keywords.
For example (:modelPath \"/models/qwen2.5-coder-1.5b-q4_k_m.gguf\"
:contextBudget 1024 :draft \"prompt-lookup\").  Sent as initializationOptions
when the server starts; change them at run time with `lsp-assist-set-settings'.
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

(defcustom lsp-assist-preview-delay 0.3
  "Seconds of idle time before `lsp-assist-preview-mode' asks for a suggestion."
  :type 'number)

(defcustom lsp-assist-request-timeout 20
  "Seconds to wait for the server in blocking requests.
The first request of a session may wait for the model to load."
  :type 'number)

(defface lsp-assist-preview-face
  '((t :inherit shadow))
  "Face of the suggestion shown by `lsp-assist-preview-mode'.")

(defconst lsp-assist--accept-command "lspAssist.accept")

;;;; Eglot registration

(defun lsp-assist--initialization-options (&optional _server)
  "Return `lsp-assist-settings' as the initializationOptions JSON object."
  (or lsp-assist-settings eglot--{}))

(defun lsp-assist--contact (&optional _interactive)
  "Return the eglot contact: `lsp-assist-command' with the initializationOptions."
  (append lsp-assist-command
          (list :initializationOptions #'lsp-assist--initialization-options)))

;;;###autoload
(defun lsp-assist-setup ()
  "Register lsp-assist with eglot for `lsp-assist-modes', ahead of other servers."
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

(defun lsp-assist--server ()
  "Return the lsp-assist server managing the current buffer, or signal an error."
  (let ((server (eglot-current-server)))
    (unless (lsp-assist--server-p server)
      (user-error "lsp-assist: this buffer is not managed by lsp-assist (M-x eglot)"))
    server))

(defun lsp-assist--managed-hook ()
  "Use `lsp-assist-completion-at-point' instead of eglot's capf.
Only in buffers managed by an lsp-assist server."
  (when (and (bound-and-true-p eglot--managed-mode)
             (lsp-assist--server-p (eglot-current-server)))
    (setq-local completion-at-point-functions
                (cons #'lsp-assist-completion-at-point
                      (remq #'eglot-completion-at-point completion-at-point-functions)))))

;;;; Acceptance

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

(defvar lsp-assist-last-response nil
  "The last textDocument/completion result this package requested (for debugging).")

(defun lsp-assist--request-items (server)
  "Ask SERVER for completions at point; return (RESPONSE . ITEMS)."
  (eglot--signal-textDocument/didChange)
  (let* ((response (jsonrpc-request server :textDocument/completion
                                    (eglot--CompletionParams)
                                    :timeout lsp-assist-request-timeout))
         (items (append (if (vectorp response) response (plist-get response :items)) nil)))
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

;;;; Preview (ghost text)

(defvar-local lsp-assist--overlay nil)
(defvar-local lsp-assist--overlay-item nil)
(defvar-local lsp-assist--timer nil)

(defvar lsp-assist-preview-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "TAB") #'lsp-assist-accept-preview)
    (define-key map (kbd "<tab>") #'lsp-assist-accept-preview)
    map)
  "Keymap active while a suggestion is previewed.")

(defun lsp-assist--clear-preview ()
  "Remove the previewed suggestion."
  (when lsp-assist--overlay
    (delete-overlay lsp-assist--overlay)
    (setq lsp-assist--overlay nil
          lsp-assist--overlay-item nil)))

(defun lsp-assist--show-preview (item)
  "Show ITEM's text after point."
  (lsp-assist--clear-preview)
  (let* ((text (plist-get (plist-get item :textEdit) :newText))
         (ov (make-overlay (point) (point) nil t nil)))
    (when (and text (not (string-empty-p text)))
      ;; The cursor stays before the ghost text.
      (overlay-put ov 'after-string
                   (concat (propertize (substring text 0 1) 'face 'lsp-assist-preview-face
                                       'cursor t)
                           (propertize (substring text 1) 'face 'lsp-assist-preview-face)))
      (overlay-put ov 'keymap lsp-assist-preview-map)
      (overlay-put ov 'priority 1000)
      (setq lsp-assist--overlay ov
            lsp-assist--overlay-item item))))

(defun lsp-assist-accept-preview ()
  "Insert the previewed suggestion."
  (interactive)
  (let ((item lsp-assist--overlay-item)
        (server (eglot-current-server)))
    (lsp-assist--clear-preview)
    (when (and item server)
      (lsp-assist--apply-item server item))))

(defun lsp-assist--request-preview (buffer)
  "Ask for a suggestion for BUFFER at point and preview it when it arrives."
  (when (and (buffer-live-p buffer) (eq buffer (current-buffer)))
    (let ((server (eglot-current-server))
          (tick (buffer-chars-modified-tick))
          (pos (point)))
      (when (lsp-assist--server-p server)
        (jsonrpc-async-request
         server :textDocument/completion (eglot--CompletionParams)
         :success-fn
         (lambda (response)
           (when (buffer-live-p buffer)
             (with-current-buffer buffer
               (let* ((items (append (if (vectorp response) response
                                       (plist-get response :items))
                                     nil))
                      (item (lsp-assist--suggestion items)))
                 (when (and item
                            (= tick (buffer-chars-modified-tick))
                            (= pos (point))
                            (eq buffer (window-buffer (selected-window))))
                   (lsp-assist--show-preview item))))))
         :error-fn #'ignore
         :timeout-fn #'ignore
         :deferred 'lsp-assist-preview)))))

(defun lsp-assist--after-change (&rest _)
  "Schedule a preview request after typing."
  (lsp-assist--clear-preview)
  (when (timerp lsp-assist--timer)
    (cancel-timer lsp-assist--timer))
  (setq lsp-assist--timer
        (run-with-idle-timer lsp-assist-preview-delay nil
                             #'lsp-assist--request-preview (current-buffer))))

(defun lsp-assist--pre-command ()
  "Dismiss the preview unless the command accepts it."
  (unless (eq this-command 'lsp-assist-accept-preview)
    (lsp-assist--clear-preview)))

;;;###autoload
(define-minor-mode lsp-assist-preview-mode
  "Show lsp-assist's suggestion as grey text after point when typing pauses.
TAB inserts it; any other command dismisses it."
  :lighter " ✨"
  (if lsp-assist-preview-mode
      (progn
        (add-hook 'after-change-functions #'lsp-assist--after-change nil t)
        (add-hook 'pre-command-hook #'lsp-assist--pre-command nil t))
    (remove-hook 'after-change-functions #'lsp-assist--after-change t)
    (remove-hook 'pre-command-hook #'lsp-assist--pre-command t)
    (lsp-assist--clear-preview)))

;;;; Settings

(defun lsp-assist-set-settings (settings)
  "Merge the plist SETTINGS into `lsp-assist-settings' and send them to the server.
The server receives workspace/didChangeConfiguration with {\"lspAssist\": {...}}."
  (cl-loop for (key value) on settings by #'cddr
           do (setq lsp-assist-settings (plist-put lsp-assist-settings key value)))
  (dolist (server (hash-table-values eglot--servers-by-project))
    (dolist (s server)
      (when (lsp-assist--server-p s)
        (jsonrpc-notify s :workspace/didChangeConfiguration
                        `(:settings (:lspAssist ,(lsp-assist--initialization-options))))))))

;;;; Explain and status

(defun lsp-assist--execute (command arguments)
  "Run COMMAND with the vector ARGUMENTS on the current lsp-assist server."
  (jsonrpc-request (lsp-assist--server) :workspace/executeCommand
                   `(:command ,command :arguments ,arguments)
                   :timeout lsp-assist-request-timeout))

(defun lsp-assist--show (buffer-name text)
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
  "Return the server's explanation of the context it builds at point."
  (let* ((position (eglot--pos-to-lsp-position))
         (result (lsp-assist--execute
                  "lspAssist.explainContext"
                  (vector (eglot--path-to-uri (buffer-file-name))
                          (plist-get position :line)
                          (plist-get position :character)))))
    (cond ((stringp result) result)
          ((stringp (plist-get result :text)) (plist-get result :text))
          ((plist-get result :error) (format "error: %s" (plist-get result :error)))
          (t (format "%S" result)))))

;;;###autoload
(defun lsp-assist-explain-context ()
  "Show the prompt lsp-assist builds at point, layer by layer."
  (interactive)
  (lsp-assist--show "*lsp-assist explain*" (lsp-assist-explain-context-text)))

;;;###autoload
(defun lsp-assist-status ()
  "Show the lsp-assist server's status."
  (interactive)
  (let ((result (lsp-assist--execute "lspAssist.status" [])))
    (lsp-assist--show "*lsp-assist status*"
                      (with-temp-buffer
                        (insert (jsonrpc--json-encode result))
                        (require 'json)
                        (ignore-errors (json-pretty-print-buffer))
                        (buffer-string)))))

(provide 'lsp-assist)
;;; lsp-assist.el ends here
