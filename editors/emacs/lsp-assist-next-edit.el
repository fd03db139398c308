;;; lsp-assist-next-edit.el --- next edits from lsp-assist, as overlays  -*- lexical-binding: t; -*-

;; Next edits (issue 22): after a change, once point has rested
;; `lsp-assist-next-edit-delay', ask the server's textDocument/copilotInlineEdit
;; (GitHub Copilot's method, docs/editors.md "Next edits") over eglot's connection and
;; show the first edit of this buffer: the text it replaces in
;; `lsp-assist-next-edit-face', the new text after it in
;; `lsp-assist-next-edit-text-face' (a deletion: the text struck through,
;; `lsp-assist-next-edit-delete-face'), a hint at the end of its line.  TAB jumps to it,
;; TAB again applies it and runs the edit's command
;; (github.copilot.didAcceptNextEditSuggestionItem) so the server counts it; the change
;; asks for the next one.  C-g, or any other change to the buffer, dismisses it.
;;
;; Loaded by lsp-assist.el; on in every buffer of `lsp-assist-mode' when
;; `lsp-assist-next-edit-enabled' and the server offers the accept command.

;;; Code:

(require 'cl-lib)
(require 'eglot)
(require 'jsonrpc)

(declare-function lsp-assist--buffer-server "lsp-assist")
(declare-function lsp-assist--async-request "lsp-assist")
(declare-function lsp-assist--cancel-request "lsp-assist")

(defgroup lsp-assist-next-edit nil
  "Next edits from lsp-assist."
  :group 'lsp-assist
  :prefix "lsp-assist-next-edit-")

(defcustom lsp-assist-next-edit-enabled t
  "Non-nil: show next edits in `lsp-assist-mode' buffers."
  :type 'boolean)

(defcustom lsp-assist-next-edit-delay 0.3
  "Seconds point rests after a change before a next edit is asked for."
  :type 'number)

(defcustom lsp-assist-next-edit-timeout 120
  "Seconds to wait for the server's answer (nil: no limit).
jsonrpc's own default is 10 s, and the model source of next edits (`nextEdit' model or
both) can take 10-20 s on a CPU: its answer would be thrown away on arrival."
  :type '(choice number (const nil)))

(defface lsp-assist-next-edit-face
  '((t :inherit diff-removed))
  "The text a next edit replaces.")

(defface lsp-assist-next-edit-text-face
  '((t :inherit diff-added))
  "The new text of a next edit.")

(defface lsp-assist-next-edit-delete-face
  '((((class color) (min-colors 8)) :strike-through t :foreground "red")
    (t :strike-through t))
  "The text a next edit deletes.")

(defface lsp-assist-next-edit-hint-face
  '((t :inherit shadow))
  "The hint after a next edit's line.")

(defconst lsp-assist-next-edit--method :textDocument/copilotInlineEdit)
(defconst lsp-assist-next-edit--accept "github.copilot.didAcceptNextEditSuggestionItem")

(defvar-local lsp-assist-next-edit--shown nil
  "The next edit shown: plist (:edit :beg :end :tick :jumped :server :overlays).")

(defvar-local lsp-assist-next-edit--active nil
  "Non-nil while a next edit shows: `lsp-assist-next-edit-map' is then active.")

(defvar-local lsp-assist-next-edit--timer nil)
(defvar-local lsp-assist-next-edit--tick nil
  "`buffer-chars-modified-tick' last seen by the post-command hook.")
(defvar-local lsp-assist-next-edit--own-tick nil
  "The tick right after this package applied an edit itself.")
(defvar-local lsp-assist-next-edit--pending nil "(SERVER . ID) of the request out.")

(defvar lsp-assist-next-edit-requests nil
  "The last 50 requests, newest first: plists (:params :edits :stale :shown).")
(defvar lsp-assist-next-edit-accepted nil
  "The edits applied, newest first: plists (:edit :response).")
(defvar lsp-assist-next-edit-shown-count 0 "How many next edits were shown.")

(defvar lsp-assist-next-edit-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "TAB") #'lsp-assist-next-edit-jump-or-apply)
    (define-key map (kbd "<tab>") #'lsp-assist-next-edit-jump-or-apply)
    (define-key map (kbd "C-g") #'lsp-assist-next-edit-dismiss)
    map)
  "Keys active while a next edit shows (and only then).")

(defvar lsp-assist-next-edit--emulation-alist
  `((lsp-assist-next-edit--active . ,lsp-assist-next-edit-map)))

;; Appended: the suggestion preview's TAB (an earlier emulation map) wins while it shows.
(add-to-list 'emulation-mode-map-alists 'lsp-assist-next-edit--emulation-alist t)

(defun lsp-assist-next-edit--server ()
  "The lsp-assist server of this buffer when it offers next edits, else nil."
  (let ((server (lsp-assist--buffer-server)))
    (when server
      (let* ((caps (eglot--capabilities server))
             (commands (plist-get (plist-get caps :executeCommandProvider) :commands)))
        (and (seq-contains-p commands lsp-assist-next-edit--accept) server)))))

(defun lsp-assist-next-edit-visible-p ()
  "Non-nil when a next edit shows in this buffer, on the text it was drawn on."
  (and lsp-assist-next-edit--shown
       (eql (plist-get lsp-assist-next-edit--shown :tick) (buffer-chars-modified-tick))))

(defun lsp-assist-next-edit--cancel ()
  (when lsp-assist-next-edit--pending
    (lsp-assist--cancel-request lsp-assist-next-edit--pending)
    (setq lsp-assist-next-edit--pending nil)))

(defun lsp-assist-next-edit-dismiss ()
  "Remove the next edit shown."
  (interactive)
  (when lsp-assist-next-edit--shown
    (mapc #'delete-overlay (plist-get lsp-assist-next-edit--shown :overlays)))
  (setq lsp-assist-next-edit--shown nil
        lsp-assist-next-edit--active nil))

(defun lsp-assist-next-edit--hint (deletion)
  (propertize (if deletion "  next edit: delete (TAB)" "  next edit (TAB)")
              'face 'lsp-assist-next-edit-hint-face))

(defun lsp-assist-next-edit--show (server edit)
  "Draw EDIT (a copilotInlineEdit edit) and tell SERVER it shows."
  (lsp-assist-next-edit-dismiss)
  (let* ((region (eglot--range-region (plist-get edit :range)))
         (beg (car region))
         (end (cdr region))
         (text (plist-get edit :text))
         (deletion (equal text ""))
         (ov (make-overlay beg end nil t nil))
         (hint (save-excursion
                 (goto-char beg)
                 (make-overlay (line-end-position) (line-end-position) nil t nil))))
    (overlay-put ov 'priority 900)
    (overlay-put ov 'lsp-assist-next-edit t)
    (when (< beg end)
      (overlay-put ov 'face (if deletion 'lsp-assist-next-edit-delete-face
                              'lsp-assist-next-edit-face)))
    (unless deletion
      (overlay-put ov 'after-string (propertize text 'face 'lsp-assist-next-edit-text-face)))
    (overlay-put hint 'after-string (lsp-assist-next-edit--hint deletion))
    (overlay-put hint 'lsp-assist-next-edit t)
    (setq lsp-assist-next-edit--shown
          (list :edit edit :beg beg :end end :tick (buffer-chars-modified-tick)
                :jumped nil :server server :overlays (list ov hint))
          lsp-assist-next-edit--active t)
    (cl-incf lsp-assist-next-edit-shown-count)
    (jsonrpc-notify server :textDocument/didShowInlineEdit
                    (list :item (list :command (plist-get edit :command))))))

(defun lsp-assist-next-edit-request ()
  "Ask for the next edit at point now."
  (interactive)
  (let ((server (lsp-assist-next-edit--server))
        (buffer (current-buffer))
        (tick (buffer-chars-modified-tick))
        record)
    (when server
      (lsp-assist-next-edit--cancel)
      (lsp-assist-next-edit-dismiss)
      (eglot--signal-textDocument/didChange)
      (let* ((doc (eglot--VersionedTextDocumentIdentifier))
             (version (plist-get doc :version))
             (params (list :textDocument doc
                           :position (eglot--pos-to-lsp-position)
                           :context (list :triggerKind 2))))
        (setq record (list :params params))
        (push record lsp-assist-next-edit-requests)
        (when (> (length lsp-assist-next-edit-requests) 50)
          (setcdr (nthcdr 49 lsp-assist-next-edit-requests) nil))
        (let ((id (lsp-assist--async-request
                   server lsp-assist-next-edit--method params
                   :success-fn
                   (lambda (result)
                     (when (buffer-live-p buffer)
                       (with-current-buffer buffer
                         (setq lsp-assist-next-edit--pending nil)
                         (let ((edits (append (plist-get result :edits) nil))
                               (uri (plist-get doc :uri)))
                           (plist-put record :edits (length edits))
                           (if (or (not (eql tick (buffer-chars-modified-tick)))
                                   (not (eq buffer (window-buffer (selected-window)))))
                               (plist-put record :stale t)
                             (let ((edit (cl-find-if
                                          (lambda (e)
                                            (let ((d (plist-get e :textDocument)))
                                              (and (equal (plist-get d :uri) uri)
                                                   (eql (plist-get d :version) version))))
                                          edits)))
                               (when edit
                                 (plist-put record :shown edit)
                                 (lsp-assist-next-edit--show server edit))))))))
                   :error-fn (lambda (err) (plist-put record :error err))
                   :timeout-fn (lambda () (plist-put record :error 'timeout))
                   :timeout lsp-assist-next-edit-timeout)))
          (setq lsp-assist-next-edit--pending (cons server id)))))))

(defun lsp-assist-next-edit--schedule ()
  (when (timerp lsp-assist-next-edit--timer)
    (cancel-timer lsp-assist-next-edit--timer))
  (let ((buffer (current-buffer)))
    (setq lsp-assist-next-edit--timer
          (run-with-timer lsp-assist-next-edit-delay nil
                          (lambda ()
                            (when (and (buffer-live-p buffer)
                                       (eq buffer (window-buffer (selected-window))))
                              (with-current-buffer buffer
                                (setq lsp-assist-next-edit--timer nil)
                                (lsp-assist-next-edit-request))))))))

(defun lsp-assist-next-edit-jump-or-apply ()
  "Jump to the next edit shown; when point is there already, apply it."
  (interactive)
  (let ((shown lsp-assist-next-edit--shown))
    (cond
     ((not (lsp-assist-next-edit-visible-p)) (lsp-assist-next-edit-dismiss))
     ((or (not (plist-get shown :jumped)) (/= (point) (plist-get shown :beg)))
      (push-mark nil t)
      (goto-char (plist-get shown :beg))
      (plist-put shown :jumped t))
     (t (lsp-assist-next-edit-apply)))))

(defun lsp-assist-next-edit-apply ()
  "Apply the next edit shown, leave point at its start and run its command."
  (interactive)
  (when (lsp-assist-next-edit-visible-p)
    (let* ((shown lsp-assist-next-edit--shown)
           (edit (plist-get shown :edit))
           (server (plist-get shown :server))
           (beg (plist-get shown :beg))
           (command (plist-get edit :command))
           (record (list :edit edit)))
      (lsp-assist-next-edit-dismiss)
      (goto-char beg)
      (delete-region beg (plist-get shown :end))
      (insert (plist-get edit :text))
      (goto-char beg)
      (setq lsp-assist-next-edit--own-tick (buffer-chars-modified-tick)
            lsp-assist-next-edit--tick lsp-assist-next-edit--own-tick)
      (push record lsp-assist-next-edit-accepted)
      (when command
        (eglot--signal-textDocument/didChange)
        (jsonrpc-async-request
         server :workspace/executeCommand
         (list :command (plist-get command :command)
               :arguments (plist-get command :arguments))
         :success-fn (lambda (result) (plist-put record :response result))
         :error-fn (lambda (err) (plist-put record :error err))))
      ;; The change is the user's too: the next edit of the same rename follows.
      (lsp-assist-next-edit--schedule))))

(defun lsp-assist-next-edit--post-command ()
  "Dismiss on a change to the text, and ask again after it."
  (let ((tick (buffer-chars-modified-tick)))
    (unless (eql tick lsp-assist-next-edit--tick)
      (setq lsp-assist-next-edit--tick tick)
      (when (and lsp-assist-next-edit--shown (not (lsp-assist-next-edit-visible-p)))
        (lsp-assist-next-edit-dismiss))
      (unless (eql tick lsp-assist-next-edit--own-tick)
        (lsp-assist-next-edit--schedule)))))

(define-minor-mode lsp-assist-next-edit-mode
  "Next edits from lsp-assist: \\<lsp-assist-next-edit-map>\\[lsp-assist-next-edit-jump-or-apply] jumps to the one shown, then applies it."
  :lighter nil
  (if lsp-assist-next-edit-mode
      (progn
        (setq lsp-assist-next-edit--tick (buffer-chars-modified-tick))
        (add-hook 'post-command-hook #'lsp-assist-next-edit--post-command nil t))
    (remove-hook 'post-command-hook #'lsp-assist-next-edit--post-command t)
    (when (timerp lsp-assist-next-edit--timer) (cancel-timer lsp-assist-next-edit--timer))
    (lsp-assist-next-edit--cancel)
    (lsp-assist-next-edit-dismiss)))

(defun lsp-assist-next-edit--follow-lsp-assist-mode ()
  "On `lsp-assist-mode-hook': next edits on and off with it."
  (lsp-assist-next-edit-mode
   (if (and (bound-and-true-p lsp-assist-mode) lsp-assist-next-edit-enabled) 1 -1)))

(add-hook 'lsp-assist-mode-hook #'lsp-assist-next-edit--follow-lsp-assist-mode)

(provide 'lsp-assist-next-edit)
;;; lsp-assist-next-edit.el ends here
