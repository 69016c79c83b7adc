// The page scripts are plain browser scripts (one IIFE each, "use strict", no modules, no build step),
// inlined into pages that must open in any current browser: ES2015, browser globals only.
import js from "@eslint/js";

export default [
  js.configs.recommended,
  {
    files: ["interp/report/assets/**/*.js"],
    languageOptions: {
      ecmaVersion: 2015,
      sourceType: "script",
      globals: { window: "readonly", document: "readonly", Option: "readonly" },
    },
    rules: {
      eqeqeq: "error",
      "no-var": "off",
      strict: ["error", "function"],
    },
  },
];
