// The page scripts (reports, the explainer, the graph viewer, the dashboards) are plain browser scripts (one
// IIFE each, "use strict", no modules, no build step), inlined into pages that must open in any current browser: ES2015, browser globals only.
import js from "@eslint/js";

export default [
  js.configs.recommended,
  {
    files: [
      "interp/report/assets/**/*.js",
      "interp/circuits/features/viewer/**/*.js",
      "interp/sae/dashboards/assets/**/*.js",
    ],
    languageOptions: {
      ecmaVersion: 2015,
      sourceType: "script",
      globals: {
        window: "readonly",
        document: "readonly",
        Option: "readonly",
        location: "readonly",
        history: "readonly",
        localStorage: "readonly",
        fetch: "readonly",
      },
    },
    rules: {
      eqeqeq: "error",
      "no-var": "off",
      strict: ["error", "function"],
      "no-unused-vars": ["error", { caughtErrors: "none" }],
    },
  },
];
