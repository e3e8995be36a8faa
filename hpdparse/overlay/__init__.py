"""The --layout overlay (`<stem>.layout.pdf`): block roles and their colours (`roles`), the drawing
(`draw`) and the document's overlay PDF (`layout_pdf`). Used by the runners (convert/render
--layout) and by `hpdparse review`."""
